package gateways

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/latchd/latch/turn"
	"io"
	"strings"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/store"
)

// MaxInboundFile caps a file sent from the chat (the Bot API's download
// limit; a self-hosted Bot API server would allow more).
const MaxInboundFile = 20 << 20

// FileStore keeps files sent from the chat, inside the workspace.
type FileStore interface {
	SaveInbox(name string, size int64, fill func(io.Writer) error) (string, error)
}

// extra is what an inbox entry carries besides text.
type extra struct {
	Callback *Callback    `json:"callback,omitempty"`
	Files    []Attachment `json:"files,omitempty"`
	// Group is the message's album (see Message.Group), kept so that a
	// restart can still fold what was stored and not folded yet.
	Group string `json:"group,omitempty"`
	// Markdown and Buttons are a notice's (Notice).
	Markdown bool     `json:"markdown,omitempty"`
	Buttons  []Button `json:"buttons,omitempty"`
}

func encodeExtra(m Message) json.RawMessage {
	return extra{Callback: m.Callback, Files: m.Files, Group: m.Group}.encode()
}

func (x extra) encode() json.RawMessage {
	if x.Callback == nil && len(x.Files) == 0 && x.Group == "" && !x.Markdown && len(x.Buttons) == 0 {
		return nil
	}
	raw, _ := json.Marshal(x)
	return raw
}

func decodeExtra(e store.Entry) extra {
	var x extra
	if len(e.Extra) > 0 {
		json.Unmarshal(e.Extra, &x)
	}
	return x
}

// pressed handles a button press from the latched chat: the approval
// buttons carry turn.Payload(kind, id). An unknown kind or a stale id is
// answered "expired" and changes nothing.
func (h *Hub) pressed(ctx context.Context, e store.Entry, cb *Callback) {
	ans, ok := h.gateways[e.Gateway].(CallbackAnswerer)
	if !ok {
		return
	}
	if h.pressedLatch(ctx, e, cb, ans) {
		return
	}
	notice, resolved := "This request has expired.", ""
	kind, id, _ := turn.ParsePayload(cb.Data)
	d, known := map[turn.Kind]agent.Decision{turn.KindApprove: agent.Approve, turn.KindAlways: agent.Always, turn.KindDeny: agent.DenyIt}[kind]
	if known && h.cfg.Agent != nil {
		key := agent.SessionKey{Gateway: e.Gateway, Chat: e.ChatID}
		if err := h.cfg.Agent.Decide(key, id, d); err == nil {
			notice = map[agent.Decision]string{agent.Approve: "Approved", agent.Always: "Approved for this session", agent.DenyIt: "Denied"}[d]
			resolved = map[agent.Decision]string{agent.Approve: "✓ approved", agent.Always: "✓ approved for this session", agent.DenyIt: "✗ denied"}[d]
		}
	}
	h.workers.Add(1)
	go func() {
		defer h.workers.Done()
		if err := ans.AnswerCallback(ctx, e.ChatID, *cb, notice, resolved); err != nil {
			h.log.Warn("answering a button press failed", logkey.Gateway, e.Gateway, logkey.Err, err)
		}
	}()
}

// saveFiles downloads the attachments of e into the workspace inbox and
// returns the text the agent should see: the caption plus where each file
// was saved and, for audio when a transcriber is configured, what it says.
// A file that cannot be saved is reported in the text too. transcripts
// are what was heard, to echo to the owner.
func (h *Hub) saveFiles(ctx context.Context, e store.Entry, files []Attachment) (text string, transcripts []string) {
	var b strings.Builder
	b.WriteString(e.Text)
	dl, ok := h.gateways[e.Gateway].(Downloader)
	for _, f := range files {
		b.WriteString("\n\n")
		switch {
		case !ok || h.cfg.Files == nil:
			fmt.Fprintf(&b, "[The owner sent a %s, but this gateway cannot download files.]", f.Kind)
		case f.Size > MaxInboundFile:
			fmt.Fprintf(&b, "[The owner sent a %s of %d bytes; it was not downloaded (limit %d MB).]", f.Kind, f.Size, MaxInboundFile>>20)
		default:
			copy, too := h.listen(f)
			rel, err := h.cfg.Files.SaveInbox(cmpName(f), f.Size, func(w io.Writer) error {
				if copy != nil {
					w = io.MultiWriter(w, copy)
				}
				return dl.Download(ctx, f, w, MaxInboundFile)
			})
			if err != nil {
				h.log.Warn("saving an inbound file failed", logkey.Gateway, e.Gateway, logkey.Err, err)
				fmt.Fprintf(&b, "[The owner sent a %s, but saving it failed: %v]", f.Kind, err)
				continue
			}
			if copy == nil && too == "" {
				fmt.Fprintf(&b, "[The owner sent a %s, saved in the workspace as %s]", f.Kind, rel)
				continue
			}
			heard := h.transcribe(ctx, e, f, rel, copy, too)
			b.WriteString(heard.note)
			if heard.transcript != "" {
				transcripts = append(transcripts, heard.transcript)
			}
		}
	}
	return strings.TrimSpace(b.String()), transcripts
}

func cmpName(f Attachment) string {
	if f.Name != "" {
		return f.Name
	}
	ext := map[string]string{"photo": ".jpg", "voice": ".ogg", "audio": ".mp3", "video": ".mp4"}[f.Kind]
	return f.Kind + ext
}
