package discord

import (
	"github.com/latchd/latch/turn"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
)

// TestRunPassesWhatHasNoText: forwards, stickers, polls and a forwarded
// bot's embed reach the sink, live and from the history after downtime,
// instead of being dropped for want of content. A forward's text is
// labelled, so "!…" or "/pair …" in it can never act as the owner's
// command; its files come along (a forwarded voice message as voice).
func TestRunPassesWhatHasNoText(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	sink := newSink("")
	stop := run(t, g, sink)

	spec := discordtest.File{Name: "spec.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.7")}
	voice := discordtest.File{Name: "voice-message.ogg", ContentType: "audio/ogg", Data: []byte("OggS")}
	// The Telegram adapter's words; a text that starts with them is
	// neither a "!" command nor a "/" one.
	const label = "↪ Forwarded message:\n"
	type want struct {
		text  string
		files []string // kind:name
	}
	cases := []struct {
		name string
		post discordtest.Post
		want want
	}{
		{"forwarded command", discordtest.Post{Forward: &discordtest.Snapshot{Content: "!rm -rf ~"}},
			want{text: label + "!rm -rf ~"}},
		{"forwarded pairing", discordtest.Post{Forward: &discordtest.Snapshot{Content: "/pair WXYZ-2345"}},
			want{text: label + "/pair WXYZ-2345"}},
		{"forwarded file", discordtest.Post{Forward: &discordtest.Snapshot{Content: "please read this", Files: []discordtest.File{spec}}},
			want{text: label + "please read this", files: []string{"document:spec.pdf"}}},
		{"forwarded voice message", discordtest.Post{Forward: &discordtest.Snapshot{Files: []discordtest.File{voice}, Flags: discordtest.FlagVoiceMessage}},
			want{files: []string{"voice:voice-message.ogg"}}},
		{"forwarded embed", discordtest.Post{Forward: &discordtest.Snapshot{Embeds: []discordtest.Embed{{Title: "Build passed", Description: "All 12 checks green"}}}},
			want{text: label + "[The owner sent an embed: Build passed\nAll 12 checks green]"}},
		{"forwarded nothing", discordtest.Post{Forward: &discordtest.Snapshot{}},
			want{text: label + unreadable}},
		{"forward with words", discordtest.Post{Content: "!ls", Forward: &discordtest.Snapshot{Content: "look"}},
			want{text: label + "look\n\n!ls"}},
		{"sticker", discordtest.Post{Stickers: []discordtest.Sticker{{ID: "749054660769218631", Name: "Wave"}}},
			want{text: "[The owner sent a sticker: Wave]"}},
		{"sticker with text", discordtest.Post{Content: "thanks", Stickers: []discordtest.Sticker{{ID: "749054660769218631", Name: "Wave"}}},
			want{text: "thanks"}},
		{"poll", discordtest.Post{Poll: &discordtest.Poll{Question: "Lunch?", Answers: []string{"Pizza", "Sushi"}}},
			want{text: `[The owner sent a poll: "Lunch?", options "Pizza", "Sushi"]`}},
		{"voice message", discordtest.Post{Files: []discordtest.File{voice}, Flags: discordtest.FlagVoiceMessage},
			want{files: []string{"voice:voice-message.ogg"}}},
		{"nothing", discordtest.Post{}, want{text: unreadable}},
	}
	check := func(t *testing.T, got []gateways.Message, posted []discordtest.Message) {
		t.Helper()
		if len(got) != len(cases) {
			t.Fatalf("stored %d messages, want %d: %q", len(got), len(cases), texts(got))
		}
		for i, c := range cases {
			m := got[i]
			var files []string
			for _, f := range m.Files {
				files = append(files, f.Kind+":"+f.Name)
			}
			if m.ID != posted[i].ID || m.Text != c.want.text || !slices.Equal(files, c.want.files) {
				t.Errorf("%s: stored %q with files %q, want %q with %q", c.name, m.Text, files, c.want.text, c.want.files)
			}
			if fw := posted[i].Forwarded; fw != nil && len(fw.Attachments) > 0 && m.Files[0].ID != fw.Attachments[0].URL {
				t.Errorf("%s: file id %q, want the snapshot's attachment URL %q", c.name, m.Files[0].ID, fw.Attachments[0].URL)
			}
		}
	}
	post := func(offline bool) []discordtest.Message {
		var out []discordtest.Message
		for _, c := range cases {
			p := c.post
			p.Author, p.Offline = alice, offline
			out = append(out, srv.Post(p))
		}
		return out
	}

	t.Run("live", func(t *testing.T) {
		posted := post(false)
		check(t, sink.waitStored(t, len(cases)), posted)
	})
	t.Run("from the history", func(t *testing.T) {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		waitFake(t, srv, "the gateway to close", func() bool { return !srv.Connected() })
		posted := post(true)
		g2, _ := started(t, srv)
		run(t, g2, sink)
		check(t, sink.waitStored(t, 2*len(cases))[len(cases):], posted)
	})
	if n := srv.Count(discordtest.RouteAttachment); n != 0 {
		t.Errorf("%d attachments fetched while translating, want none (only the Hub downloads)", n)
	}
}

// TestForwardInServerNeedsMention: a forward in a server is dropped like
// any server message that does not mention the bot; only DMs and mentions
// reach latch.
func TestForwardInServerNeedsMention(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv, func(c *Config) { c.AllowGroups = true })
	sink := newSink("")
	run(t, g, sink)
	srv.Post(discordtest.Post{Author: alice, GuildID: "800000000000000001", ChannelID: "800000000000000002",
		Forward: &discordtest.Snapshot{Content: "!uptime"}})
	srv.SendDM(alice, "after")
	if got := texts(sink.waitStored(t, 1)); !slices.Equal(got, []string{"after"}) {
		t.Errorf("stored %q, want only the DM", got)
	}
}

// TestDescribeBounds: a description keeps names on one line, names at
// most maxNamed things and stays within maxDescription runes, however
// long or many the names and texts that come; it always starts with "[",
// so it is never a command.
func TestDescribeBounds(t *testing.T) {
	long := "!" + strings.Repeat("x", 5000)
	var stickers []*discordgo.StickerItem
	var answers []discordgo.PollAnswer
	var embeds []*discordgo.MessageEmbed
	for range 20 {
		stickers = append(stickers, &discordgo.StickerItem{Name: "a\nb " + long})
		answers = append(answers, discordgo.PollAnswer{Media: &discordgo.PollMedia{Text: long}})
		embeds = append(embeds, &discordgo.MessageEmbed{Title: long, Description: long})
	}
	cases := map[string]*discordgo.Message{
		"stickers": {StickerItems: stickers},
		"poll":     {Poll: &discordgo.Poll{Question: discordgo.PollMedia{Text: long}, Answers: answers}},
		"embeds":   {Embeds: embeds},
		"all":      {StickerItems: stickers, Poll: &discordgo.Poll{Question: discordgo.PollMedia{Text: long}}, Embeds: embeds},
		"nil":      nil,
	}
	for name, m := range cases {
		got := describe(m)
		if n := utf8.RuneCountInString(got); n > maxDescription || !strings.HasPrefix(got, "[") {
			t.Errorf("%s: %d runes starting %q, want at most %d starting with [", name, n, turn.Clip(got, 20), maxDescription)
		}
	}
	if got := describeStickers(stickers[:2]); strings.Count(got, "\n") != 0 {
		t.Errorf("sticker names across lines: %q", got)
	}
	if got := strings.Count(describePoll(cases["poll"].Poll), `", "`); got != maxNamed-1 {
		t.Errorf("poll names %d answers, want %d", got+1, maxNamed)
	}
}
