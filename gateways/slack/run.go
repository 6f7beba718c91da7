package slack

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
)

// historyPages bounds the conversations.history pages read at start (of
// historyLimit messages each): what the owner sent while latch was down.
const (
	historyPages = 5
	historyLimit = 100
)

// inbound is one thing to hand to the Sink: a message, or nothing (an
// event latch ignores), under its key in its chat.
type inbound struct {
	msg  *adapter.Message
	chat string
	key  string
	isTS bool
}

// Run reads what the owner sent while latch was down, then the Socket
// Mode events, until ctx ends. An envelope is acknowledged once Ingest
// stored what it carries; while Ingest fails it is tried again, and never
// acknowledged before. invalid_auth on reconnecting ends Run with
// ErrUnauthorized.
func (g *Gateway) Run(ctx context.Context, sink adapter.Sink) error {
	stored, err := sink.Cursor(ctx, g.Name())
	if err != nil {
		return err
	}
	cur := parseCursor(stored)
	if err := g.catchUp(ctx, sink, &cur); err != nil {
		return err
	}
	bo := retry.Backoff{Min: g.cfg.MinBackoff, Max: g.cfg.MaxBackoff}
	for {
		err := g.runSocket(ctx, sink, &cur)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err = g.scrub(err)
		g.noteErr(err)
		if unauthorized(err) {
			return errors.Join(adapter.ErrUnauthorized, errors.New("slack: Slack refused the app token: "+err.Error()))
		}
		wait := bo.Next()
		g.log.Warn("socket mode failed; reconnecting", "err", err, "retry_in", wait)
		if !retry.Sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// runSocket runs one socketmode client (which reconnects by itself on
// disconnect envelopes and dropped sockets) until it gives up.
func (g *Gateway) runSocket(ctx context.Context, sink adapter.Sink, cur *cursor) error {
	var opts []socketmode.Option
	if g.cfg.PingInterval > 0 {
		opts = append(opts, socketmode.OptionPingInterval(g.cfg.PingInterval))
	}
	sm := socketmode.New(g.api, opts...)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sm.RunContext(ctx) }()
	for {
		select {
		case err := <-done:
			return err
		case <-g.dirty:
			g.ingest(ctx, sink, cur, nil)
		case evt := <-sm.Events:
			g.handle(ctx, sm, sink, cur, evt)
		}
	}
}

func (g *Gateway) handle(ctx context.Context, sm *socketmode.Client, sink adapter.Sink, cur *cursor, evt socketmode.Event) {
	switch evt.Type {
	case socketmode.EventTypeConnected, socketmode.EventTypeHello:
		g.noteErr(nil)
		return
	case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError, socketmode.EventTypeErrorBadMessage,
		socketmode.EventTypeErrorWriteFailed, socketmode.EventTypeInvalidAuth:
		g.log.Warn("socket mode", "event", string(evt.Type), "err", g.scrub(errors.New(describe(evt.Data))))
		return
	case socketmode.EventTypeDisconnect:
		reason := ""
		if evt.Request != nil {
			reason = evt.Request.Reason
		}
		g.log.Info("slack asked to reconnect", "reason", reason)
		return
	}
	if evt.Request == nil || evt.Request.EnvelopeID == "" {
		return
	}
	var in []inbound
	switch data := evt.Data.(type) {
	case slackevents.EventsAPIEvent:
		in = g.fromEvent(data)
	case slack.InteractionCallback:
		in = g.fromPress(data)
	case slack.SlashCommand:
		in = g.fromCommand(data)
	}
	var msgs []adapter.Message
	next := cur.clone()
	for _, x := range in {
		if x.chat == "" || cur.seen(x.chat, x.key, x.isTS) {
			continue
		}
		next.add(x.chat, x.key, x.isTS)
		if x.msg != nil {
			msgs = append(msgs, *x.msg)
		}
	}
	if len(msgs) > 0 && !g.ingestRetrying(ctx, sink, cur, next, msgs) {
		return // not acknowledged: Slack sends it again
	}
	if err := sm.AckCtx(ctx, evt.Request.EnvelopeID, nil); err != nil && ctx.Err() == nil {
		g.log.Warn("acknowledging an envelope failed", "err", g.scrub(err))
	}
}

// ingestRetrying stores msgs with the cursor next, trying again until it
// works or ctx ends; it reports whether it worked.
func (g *Gateway) ingestRetrying(ctx context.Context, sink adapter.Sink, cur *cursor, next cursor, msgs []adapter.Message) bool {
	next.markOwners(g.ownerChats())
	ok := retry.Until(ctx, retry.Backoff{Min: g.cfg.MinBackoff, Max: g.cfg.MaxBackoff}, g.log, "storing messages failed",
		func() error { return sink.Ingest(ctx, g.Name(), next.encode(), msgs) })
	if ok {
		*cur = next
	}
	return ok
}

// ingest stores the cursor with msgs once (the owner chats marked).
func (g *Gateway) ingest(ctx context.Context, sink adapter.Sink, cur *cursor, msgs []adapter.Message) {
	next := cur.clone()
	next.markOwners(g.ownerChats())
	if len(msgs) == 0 && next.encode() == cur.encode() {
		return
	}
	if err := sink.Ingest(ctx, g.Name(), next.encode(), msgs); err != nil {
		g.log.Warn("storing the cursor failed", "err", err)
		select { // try again with the next event
		case g.dirty <- struct{}{}:
		default:
		}
		return
	}
	*cur = next
}

// fromEvent translates an Events API event: a direct message, or (with
// AllowGroups) a mention in a channel. Everything else — other
// workspaces, bots (latch itself included), edits, joins — is nothing.
func (g *Gateway) fromEvent(e slackevents.EventsAPIEvent) []inbound {
	team, bot, _ := g.ids()
	if e.Type != slackevents.CallbackEvent || e.TeamID != team {
		return nil
	}
	var m adapter.Message
	var files []slack.File
	switch ev := e.InnerEvent.Data.(type) {
	case *slackevents.MessageEvent:
		if ev.ChannelType != "im" || ev.ThreadTimeStamp != "" && ev.ThreadTimeStamp != ev.TimeStamp {
			return nil
		}
		if ev.BotID != "" || ev.User == "" || ev.User == bot || ev.SubType != "" && ev.SubType != "file_share" {
			return nil
		}
		m = adapter.Message{ChatType: adapter.ChatPrivate, Text: ev.Text}
		if ev.Message != nil {
			files = ev.Message.Files
		}
		m.ID, m.ChatID, m.UserID = ev.TimeStamp, chatID(team, ev.Channel), chatID(userTeam(ev.UserTeam, team), ev.User)
	case *slackevents.AppMentionEvent:
		if !g.cfg.AllowGroups || ev.BotID != "" || ev.User == "" || ev.User == bot || ev.ThreadTimeStamp != "" && ev.ThreadTimeStamp != ev.TimeStamp {
			return nil
		}
		m = adapter.Message{ChatType: adapter.ChatGroup, Text: strings.TrimSpace(strings.ReplaceAll(ev.Text, "<@"+bot+">", ""))}
		files = ev.Files
		m.ID, m.ChatID, m.UserID = ev.TimeStamp, chatID(team, ev.Channel), chatID(userTeam(ev.UserTeam, team), ev.User)
	default:
		return nil
	}
	return []inbound{g.message(m, files)}
}

func userTeam(t, team string) string {
	if t == "" {
		return team
	}
	return t
}

// message completes m: Slack's escapes undone, links as their reader sees
// them, the files as attachments.
func (g *Gateway) message(m adapter.Message, files []slack.File) inbound {
	m.Gateway = g.Name()
	m.Text = fromMrkdwn(m.Text)
	m.Time = tsTime(m.ID)
	for _, f := range files {
		url := f.URLPrivateDownload
		if url == "" {
			url = f.URLPrivate
		}
		if url == "" {
			continue
		}
		m.Files = append(m.Files, adapter.Attachment{ID: url, Name: f.Name, Size: int64(f.Size), Kind: kindOf(f.Mimetype), MIME: f.Mimetype})
	}
	return inbound{msg: &m, chat: m.ChatID, key: m.ID, isTS: true}
}

func kindOf(mime string) string {
	switch {
	case strings.HasPrefix(mime, "image/"):
		return "photo"
	case strings.HasPrefix(mime, "audio/"):
		return "audio"
	case strings.HasPrefix(mime, "video/"):
		return "video"
	}
	return "document"
}

func tsTime(ts string) time.Time {
	if s := seconds(ts); s > 0 {
		return time.Unix(s, 0)
	}
	return time.Now()
}

// fromPress translates a button press (block_actions): one Message with a
// Callback per action. Presses elsewhere than a message of latch's are
// nothing.
func (g *Gateway) fromPress(c slack.InteractionCallback) []inbound {
	team, _, _ := g.ids()
	if c.Type != slack.InteractionTypeBlockActions || c.Team.ID != team || c.User.ID == "" {
		return nil
	}
	channel, ts := c.Container.ChannelID, c.Container.MessageTs
	if channel == "" {
		channel = c.Channel.ID
	}
	var out []inbound
	for _, a := range c.ActionCallback.BlockActions {
		if a.Value == "" || channel == "" {
			continue
		}
		chat := chatID(team, channel)
		typ := adapter.ChatPrivate
		if !strings.HasPrefix(channel, "D") {
			typ = adapter.ChatGroup
		}
		// The presser's id leads, for AnswerCallback's notice.
		key := c.User.ID + " " + c.TriggerID + " " + a.ActionID
		m := adapter.Message{Gateway: g.Name(), ID: key, ChatID: chat, ChatType: typ,
			UserID: chatID(userTeam(c.User.TeamID, team), c.User.ID), Time: time.Now(),
			Callback: &adapter.Callback{ID: key, Data: a.Value, MessageID: ts}}
		out = append(out, inbound{msg: &m, chat: chat, key: key})
	}
	return out
}

// fromCommand translates a slash command (/pair, /stop, …) into the text
// the Hub reads.
func (g *Gateway) fromCommand(c slack.SlashCommand) []inbound {
	team, _, _ := g.ids()
	if c.TeamID != team || c.UserID == "" || c.ChannelID == "" || !strings.HasPrefix(c.Command, "/") {
		return nil
	}
	typ := adapter.ChatPrivate
	if !strings.HasPrefix(c.ChannelID, "D") {
		if !g.cfg.AllowGroups {
			return nil
		}
		typ = adapter.ChatGroup
	}
	chat := chatID(team, c.ChannelID)
	m := adapter.Message{Gateway: g.Name(), ID: c.TriggerID, ChatID: chat, ChatType: typ, UserID: chatID(team, c.UserID),
		Text: strings.TrimSpace(c.Command + " " + c.Text), Time: time.Now()}
	return []inbound{{msg: &m, chat: chat, key: c.TriggerID}}
}

// catchUp reads, for each latched conversation in the cursor, what was
// sent after the newest message handled there, oldest first, and hands it
// in once.
func (g *Gateway) catchUp(ctx context.Context, sink adapter.Sink, cur *cursor) error {
	team, bot, _ := g.ids()
	for _, m := range cur.owners() {
		t, channel, _ := strings.Cut(m.Chat, "/")
		if t != team || m.Last == "" {
			continue
		}
		oldest := m.Last
		for page := 0; page < historyPages; page++ {
			var h *slack.GetConversationHistoryResponse
			err := g.call(ctx, func(ctx context.Context) (err error) {
				h, err = g.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
					ChannelID: channel, Oldest: oldest, Limit: historyLimit})
				return err
			})
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				g.log.Warn("reading the conversation's history failed", "err", err)
				break
			}
			next := cur.clone()
			var msgs []adapter.Message
			// Slack answers newest first.
			for i := len(h.Messages) - 1; i >= 0; i-- {
				x := h.Messages[i]
				if !tsAfter(x.Timestamp, oldest) {
					continue
				}
				oldest = x.Timestamp
				if x.BotID != "" || x.User == "" || x.User == bot || x.SubType != "" && x.SubType != "file_share" ||
					x.ThreadTimestamp != "" && x.ThreadTimestamp != x.Timestamp || cur.seen(m.Chat, x.Timestamp, true) {
					next.add(m.Chat, x.Timestamp, true)
					continue
				}
				typ := adapter.ChatPrivate
				if !strings.HasPrefix(channel, "D") {
					typ = adapter.ChatGroup
					if !strings.Contains(x.Text, "<@"+bot+">") {
						next.add(m.Chat, x.Timestamp, true)
						continue
					}
					x.Text = strings.TrimSpace(strings.ReplaceAll(x.Text, "<@"+bot+">", ""))
				}
				in := g.message(adapter.Message{ID: x.Timestamp, ChatID: m.Chat, ChatType: typ,
					UserID: chatID(userTeam(x.Team, team), x.User), Text: x.Text}, x.Files)
				next.add(m.Chat, x.Timestamp, true)
				msgs = append(msgs, *in.msg)
			}
			if len(msgs) > 0 || next.encode() != cur.encode() {
				if !g.ingestRetrying(ctx, sink, cur, next, msgs) {
					return ctx.Err()
				}
			}
			if !h.HasMore {
				break
			}
		}
	}
	return nil
}
