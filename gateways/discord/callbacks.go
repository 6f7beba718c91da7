package discord

import (
	"context"
	"errors"
	"fmt"
	"github.com/latchd/latch/turn"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways/adapter"
)

// Interaction response types latch uses.
const (
	responseDeferredUpdate = 6 // acknowledge, change nothing
	responseUpdateMessage  = 7 // edit the message that carries the button
)

// Discord's error codes for an interaction answered too late (its three
// seconds are over) and for one answered already.
const (
	codeUnknownInteraction = 10062
	codeAlreadyAcked       = 40060
)

// maxTexts bounds the message texts remembered for AnswerCallback.
const maxTexts = 64

// textMemory remembers the text of recent messages with buttons, by
// message id, so that answering a press can append the outcome to it.
type textMemory struct {
	mu    sync.Mutex
	order []string
	text  map[string]string
}

func (t *textMemory) remember(id, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.text == nil {
		t.text = map[string]string{}
	}
	if _, ok := t.text[id]; !ok {
		if len(t.order) == maxTexts {
			delete(t.text, t.order[0])
			t.order = t.order[1:]
		}
		t.order = append(t.order, id)
	}
	t.text[id] = text
}

func (t *textMemory) get(id string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.text[id]
	return s, ok
}

// interactionResponse is an interaction's initial response. discordgo's
// own type always sends "content" and "embeds", which an UPDATE_MESSAGE
// would apply; here absent fields stay absent.
type interactionResponse struct {
	Type int         `json:"type"`
	Data *updateData `json:"data,omitempty"`
}

type updateData struct {
	Content         *string                           `json:"content,omitempty"`
	Components      []discordgo.MessageComponent      `json:"components"`
	AllowedMentions *discordgo.MessageAllowedMentions `json:"allowed_mentions,omitempty"`
}

// AnswerCallback acknowledges a button press; Discord wants that within
// three seconds. With resolved, the answer (UPDATE_MESSAGE) edits the
// message to show resolved under its text and removes its buttons; if the
// interaction has expired meanwhile, the message is edited directly
// instead. Without resolved, the press is only acknowledged
// (DEFERRED_UPDATE_MESSAGE) and notice, if any, follows as a message only
// the presser sees. (With resolved, notice would only repeat it.)
func (g *Gateway) AnswerCallback(ctx context.Context, chatID string, cb adapter.Callback, notice, resolved string) error {
	s, err := g.started()
	if err != nil {
		return err
	}
	id, app, token, ok := decodeCallbackID(cb.ID)
	if !ok {
		return errors.New("discord: answer callback: not a Discord interaction")
	}
	in := &discordgo.Interaction{ID: id, AppID: app, Token: token}
	if resolved == "" {
		if err := g.respond(ctx, s, in, interactionResponse{Type: responseDeferredUpdate}); err != nil {
			return fmt.Errorf("discord: answer callback: %w", err)
		}
		if notice == "" {
			return nil
		}
		err := g.call(ctx, requestTimeout, []string{token}, func(opts ...discordgo.RequestOption) error {
			_, err := s.FollowupMessageCreate(in, false, &discordgo.WebhookParams{
				Content: turn.Clip(notice, maxContent), Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions(),
			}, opts...)
			return err
		})
		if err != nil {
			return fmt.Errorf("discord: send the notice of a callback: %w", err)
		}
		return nil
	}
	data := &updateData{Components: []discordgo.MessageComponent{}, AllowedMentions: noMentions()}
	if text, ok := g.texts.get(cb.MessageID); ok {
		content := withOutcome(text, resolved)
		data.Content = &content
	}
	err = g.respond(ctx, s, in, interactionResponse{Type: responseUpdateMessage, Data: data})
	switch {
	case err == nil, isAPI(err, http.StatusBadRequest, codeAlreadyAcked):
		return nil
	case isAPI(err, http.StatusNotFound, codeUnknownInteraction):
		g.log.Info("a button press was answered too late for Discord; editing the message instead")
		if err := g.resolveByEdit(ctx, s, chatID, cb.MessageID, resolved); err != nil {
			return fmt.Errorf("discord: mark the request %s: %w", resolved, err)
		}
		return nil
	}
	return fmt.Errorf("discord: answer callback: %w", err)
}

// respond posts an interaction's initial response through discordgo's
// limiter. Its URL holds the interaction token, which is scrubbed from
// errors; the limiter's bucket is named without it.
func (g *Gateway) respond(ctx context.Context, s *discordgo.Session, in *discordgo.Interaction, r any) error {
	endpoint := discordgo.EndpointInteractionResponse(in.ID, in.Token)
	bucket := discordgo.EndpointInteractionResponse(in.ID, "")
	return g.call(ctx, requestTimeout, []string{in.Token}, func(opts ...discordgo.RequestOption) error {
		_, err := s.RequestWithBucketID(http.MethodPost, endpoint, r, bucket, opts...)
		return err
	})
}

// resolveByEdit shows the outcome by editing the message itself (a bot
// may edit its own messages at any time) and removes its buttons.
func (g *Gateway) resolveByEdit(ctx context.Context, s *discordgo.Session, chatID, msgID, resolved string) error {
	text, ok := g.texts.get(msgID)
	if !ok {
		var m *discordgo.Message
		err := g.call(ctx, requestTimeout, nil, func(opts ...discordgo.RequestOption) (err error) {
			m, err = s.ChannelMessage(chatID, msgID, opts...)
			return err
		})
		if err != nil {
			return err
		}
		text = m.Content
	}
	return g.edit(ctx, s, chatID, msgID, withOutcome(text, resolved), &[]discordgo.MessageComponent{})
}

// withOutcome appends the outcome of a request to its text.
func withOutcome(text, resolved string) string {
	return turn.Clip(text, maxContent-utf8.RuneCountInString(resolved)-2) + "\n\n" + resolved
}
