package discord

import (
	"fmt"
	"github.com/latchd/latch/turn"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways/adapter"
)

// unreadable stands for a message with nothing latch can pass on: no
// text, file, sticker, poll or embed (a kind of message Discord added
// later, say). It goes to the Hub all the same, so the owner hears back
// instead of nothing. The descriptions are worded as the Telegram
// adapter's and the Hub's notes are: "[The owner sent …]".
const unreadable = "[The owner sent a message latch cannot pass on yet: it has no text, file, sticker or poll]"

const (
	// maxDescription bounds the text that describes a message without
	// text or files, well inside maxInbound.
	maxDescription = 2000
	// maxEmbed bounds the text of one embed (a description alone may
	// have 4096 characters).
	maxEmbed = 1000
	// maxNamed bounds how many stickers, poll answers or embeds a
	// description names (Discord allows 3, 10 and 10).
	maxNamed = 10
)

// body is what m gives the Hub: its text and files, and the length in
// runes of the longest text in it as sent (for maxInbound).
//
// A message with neither text nor files — a sticker, a poll — is
// described in brackets (describe), so that the Hub answers it and the
// agent knows what came; a description never starts with "!" or "/", so
// it is never a command. A sticker that comes with text is left out: the
// text is what the owner said, and a note before it would keep a
// "!command" from running. A bare mention of the bot stays empty, and
// is dropped as before. A forward is forwardBody's.
func body(m *discordgo.Message, botID string) (text string, files []adapter.Attachment, longest int) {
	own := stripMention(m.Content, botID)
	if isForward(m) {
		return forwardBody(m, own)
	}
	text, files = own, attachments(m)
	if strings.TrimSpace(m.Content) == "" && len(files) == 0 {
		text = describe(m)
	}
	return text, files, utf8.RuneCountInString(own)
}

// forwardBody is body for a forward (a message_reference of type
// FORWARD), whose own text is own: the forwarded message comes in its
// snapshot, its text labelled adapter.ForwardedLabel (or, without text or files,
// its description), its files as the owner's.
func forwardBody(m *discordgo.Message, own string) (text string, files []adapter.Attachment, longest int) {
	var fwd *discordgo.Message
	if len(m.MessageSnapshots) > 0 {
		fwd = m.MessageSnapshots[0].Message
	}
	files = attachments(m)
	if fwd != nil {
		text = strings.TrimSpace(fwd.Content)
		files = append(files, attachments(fwd)...)
	}
	longest = max(utf8.RuneCountInString(own), utf8.RuneCountInString(text))
	if text == "" && len(files) == 0 {
		text = describe(fwd)
	}
	if own != "" {
		// Discord sends the words that go with a forward as a message of
		// their own. Should a forward carry some, they follow the
		// forwarded part, so that the text still starts with the label.
		text = strings.TrimPrefix(text+"\n\n"+own, "\n\n")
	}
	if text != "" {
		text = adapter.ForwardedLabel + text
	}
	return text, files, longest
}

// isForward reports whether m forwards another message.
func isForward(m *discordgo.Message) bool {
	return m.MessageReference != nil && m.MessageReference.Type == discordgo.MessageReferenceTypeForward
}

// describe says in brackets what a message without text or files is: its
// stickers (by name: their images are not fetched), its poll (question
// and answers) or its embeds (a forwarded bot message's). nil, or a
// message with none of these, is unreadable.
func describe(m *discordgo.Message) string {
	if m == nil {
		return unreadable
	}
	var parts []string
	if s := describeStickers(m.StickerItems); s != "" {
		parts = append(parts, s)
	}
	if m.Poll != nil {
		parts = append(parts, describePoll(m.Poll))
	}
	for _, e := range m.Embeds[:min(len(m.Embeds), maxNamed)] {
		if s := describeEmbed(e); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return unreadable
	}
	return turn.Clip(strings.Join(parts, "\n"), maxDescription)
}

// describeStickers is "[The owner sent a sticker: Wave]", in the words
// the Hub uses for files: the agent reads it as the gesture it is and can
// answer it, as a person would; the sticker's image (often an animation)
// says little more than its name. "" for none.
func describeStickers(items []*discordgo.StickerItem) string {
	n, names := 0, []string(nil)
	for _, s := range items[:min(len(items), maxNamed)] {
		if s == nil {
			continue
		}
		n++
		if name := turn.OneLine(s.Name, 60); name != "" {
			names = append(names, name)
		}
	}
	switch {
	case n == 0:
		return ""
	case len(names) == 0:
		return "[The owner sent a sticker]"
	case n == 1:
		return "[The owner sent a sticker: " + names[0] + "]"
	}
	return "[The owner sent stickers: " + strings.Join(names, ", ") + "]"
}

// describePoll is `[The owner sent a poll: "Lunch?", options "Pizza",
// "Sushi"]`, as the Telegram adapter words it.
func describePoll(p *discordgo.Poll) string {
	var opts []string
	for _, a := range p.Answers[:min(len(p.Answers), maxNamed)] {
		if a.Media == nil {
			continue
		}
		text := a.Media.Text
		if text == "" && a.Media.Emoji != nil {
			text = a.Media.Emoji.Name
		}
		opts = append(opts, strconv.Quote(turn.OneLine(text, 60)))
	}
	return fmt.Sprintf("[The owner sent a poll: %q, options %s]", turn.OneLine(p.Question.Text, 300), strings.Join(opts, ", "))
}

// describeEmbed is an embed's title, description, fields and link, "" for
// one with none of them.
func describeEmbed(e *discordgo.MessageEmbed) string {
	if e == nil {
		return ""
	}
	var lines []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			lines = append(lines, s)
		}
	}
	add(e.Title)
	add(e.Description)
	for _, f := range e.Fields {
		if f != nil {
			add(strings.TrimSpace(f.Name) + ": " + strings.TrimSpace(f.Value))
		}
	}
	add(e.URL)
	if len(lines) == 0 {
		return ""
	}
	return "[The owner sent an embed: " + turn.Clip(strings.Join(lines, "\n"), maxEmbed) + "]"
}
