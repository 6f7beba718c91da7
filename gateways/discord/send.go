package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/logkey"
)

// Send delivers r to a channel, split into as many messages as Discord's
// 2000-character limit needs, and returns the id of the last one. Text is
// sent as Discord Markdown (the agent writes Markdown); a Pre reply becomes
// ``` code blocks, closed and reopened across messages. No message pings
// anyone (allowed_mentions is empty) or unfurls links: a preview would make
// Discord fetch any URL in the text, which would let a manipulated agent
// leak data without a click. ReplyTo threads the first message; a reply
// to a /pair command, within pairAnswerWait, is that command's ephemeral
// response instead (only its user sees it).
func (g *Gateway) Send(ctx context.Context, chatID string, r adapter.Reply) (string, error) {
	s, err := g.started()
	if err != nil {
		return "", err
	}
	if _, ok := snowflake(chatID); !ok {
		return "", fmt.Errorf("discord: invalid channel id %q", chatID)
	}
	replyTo, ok := snowflake(r.ReplyTo)
	if r.ReplyTo != "" && !ok {
		return "", fmt.Errorf("discord: invalid reply-to message id %q", r.ReplyTo)
	}
	if r.Paired {
		// The Hub marks this only in its answer to the message that
		// latched the chat: nobody without a valid code can make it go to
		// their channel (a stranger hears MsgPairFailed or nothing).
		// Noted before sending, since the chat is latched whether or not
		// the answer arrives.
		g.markLatched(chatID, replyTo)
	}
	if p := g.takePair(chatID, r.ReplyTo); p != nil {
		id, err := g.answerPair(ctx, s, p, r)
		if err == nil {
			return id, nil
		}
		g.log.Warn("answering a /pair in place failed; sending the reply as a message", logkey.Err, err)
		r.ReplyTo = ""
	}
	chunks := render(r)
	if len(chunks) == 0 {
		return "", ErrEmptyReply
	}
	var last string
	for i, text := range chunks {
		m := newMessage(text)
		if i == 0 {
			m.Reference = reference(chatID, r.ReplyTo)
		}
		if i == len(chunks)-1 {
			m.Components = buttonRow(r.Buttons)
		}
		var sent *discordgo.Message
		err := g.persist(ctx, g.log, func() (err error) {
			sent, err = g.post(ctx, s, chatID, m)
			return err
		})
		if err != nil {
			var apiErr *APIError
			if errors.As(err, &apiErr) && apiErr.Status >= 400 && apiErr.Status < 500 && apiErr.Status != http.StatusTooManyRequests {
				err = adapter.Rejected(err)
			}
			return "", fmt.Errorf("discord: send message %d of %d: %w", i+1, len(chunks), err)
		}
		last = sent.ID
		if len(m.Components) > 0 {
			g.texts.remember(sent.ID, m.Content) // AnswerCallback marks it
		}
	}
	return last, nil
}

// render cuts a reply into message texts, leaving out blank ones.
func render(r adapter.Reply) []string {
	text := strings.ToValidUTF8(r.Text, "\uFFFD")
	if r.Pre {
		text = fence + "\n" + escapeFences(strings.TrimRight(text, "\n")) + "\n" + fence
	}
	var out []string
	for _, c := range chunk(text, maxContent) {
		if !blank(c) {
			out = append(out, c)
		}
	}
	return out
}

// newMessage is a message that pings no one and unfurls no link.
func newMessage(text string) *discordgo.MessageSend {
	return &discordgo.MessageSend{Content: text, AllowedMentions: noMentions(), Flags: discordgo.MessageFlagsSuppressEmbeds}
}

// noMentions is allowed_mentions {"parse": []}: mentions in the text stay
// text. Parse must be an empty slice, not nil, or it marshals as null.
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// reference threads a message to replyTo; a deleted original does not fail
// the send.
func reference(chatID, replyTo string) *discordgo.MessageReference {
	if replyTo == "" {
		return nil
	}
	no := false
	return &discordgo.MessageReference{MessageID: replyTo, ChannelID: chatID, FailIfNotExists: &no}
}

// post creates one message.
func (g *Gateway) post(ctx context.Context, s *discordgo.Session, chatID string, m *discordgo.MessageSend) (*discordgo.Message, error) {
	var sent *discordgo.Message
	err := g.call(ctx, requestTimeout, nil, func(opts ...discordgo.RequestOption) (err error) {
		sent, err = s.ChannelMessageSendComplex(chatID, m, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	g.markAnswered(chatID)
	g.typing.Posted(chatID)
	return sent, nil
}

// edit changes the text (and, when rows is not nil, the buttons) of a
// message latch sent, in its turn among the channel's edits (editPacer).
// An edit parses mentions anew and could ping, so it too allows none; and
// it keeps link previews off.
func (g *Gateway) edit(ctx context.Context, s *discordgo.Session, chatID, msgID, text string, rows *[]discordgo.MessageComponent) error {
	e := discordgo.NewMessageEdit(chatID, msgID).SetContent(text)
	e.AllowedMentions = noMentions()
	e.Flags = discordgo.MessageFlagsSuppressEmbeds
	e.Components = rows
	return g.edits.do(ctx, chatID, func() error {
		return g.call(ctx, requestTimeout, nil, func(opts ...discordgo.RequestOption) error {
			_, err := s.ChannelMessageEditComplex(e, opts...)
			return err
		})
	})
}

// Typing shows "typing…" in a channel for about ten seconds, unless the
// last request for it still shows (typing.Gate). It is a courtesy: errors
// are logged at debug and otherwise ignored.
func (g *Gateway) Typing(ctx context.Context, chatID string) {
	s, err := g.started()
	if err != nil {
		return
	}
	g.typing.Show(ctx, chatID, func(ctx context.Context) {
		err := g.call(ctx, requestTimeout, nil, func(opts ...discordgo.RequestOption) error {
			return s.ChannelTyping(chatID, opts...)
		})
		if err != nil && ctx.Err() == nil {
			g.log.Debug("typing failed; ignored", logkey.Err, err)
		}
	})
}

// buttonRow is a Reply's buttons as one row of components; a payload
// Discord cannot take is left out (the Hub's texts carry typed commands for
// every button).
func buttonRow(buttons []adapter.Button) []discordgo.MessageComponent {
	var row []discordgo.MessageComponent
	for i, b := range buttons {
		if b.Data == "" || len(b.Data) > maxCustomID {
			continue
		}
		style := discordgo.SecondaryButton
		if i == 0 {
			style = discordgo.SuccessButton
		}
		row = append(row, discordgo.Button{Label: b.Label, Style: style, CustomID: b.Data})
	}
	if len(row) == 0 {
		return nil
	}
	return []discordgo.MessageComponent{discordgo.ActionsRow{Components: row}}
}
