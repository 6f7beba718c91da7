package slack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"

	"github.com/slack-go/slack"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/turn"
)

// ErrFileTooLarge is wrapped by Download for a file over the cap.
var ErrFileTooLarge = errors.New("the file is too large")

// Download fetches a file shared with latch (its url_private_download)
// with the bot token, failing once more than max bytes arrive. slack-go
// sends the token only to Slack's hosts or the configured API's.
func (g *Gateway) Download(ctx context.Context, a adapter.Attachment, w io.Writer, max int64) error {
	if a.Size > max {
		return fmt.Errorf("slack: download: %w: %d bytes, the limit is %d", ErrFileTooLarge, a.Size, max)
	}
	u, err := url.Parse(a.ID)
	if err != nil || u.Scheme != "https" && u.Scheme != "http" {
		return errors.New("slack: download: not a Slack file URL")
	}
	lw := &limitWriter{w: w, left: max}
	err = g.call(ctx, func(ctx context.Context) error { return g.api.GetFileContext(ctx, a.ID, lw) })
	if lw.over {
		return fmt.Errorf("slack: download: %w: over %d bytes", ErrFileTooLarge, max)
	}
	return err
}

type limitWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		l.over = true
		return 0, ErrFileTooLarge
	}
	l.left -= int64(len(p))
	return l.w.Write(p)
}

// SendFile uploads a file to the conversation with Slack's external
// upload flow (files.getUploadURLExternal, the upload,
// files.completeUploadExternal).
func (g *Gateway) SendFile(ctx context.Context, chat string, f turn.File, _ string) error {
	ch, err := g.channelOf(chat)
	if err != nil {
		return err
	}
	if len(f.Data) == 0 {
		return errors.New("slack: an empty file cannot be uploaded")
	}
	name := path.Base(strings.ReplaceAll(f.Name, "\\", "/"))
	if name == "" || name == "." || name == "/" {
		name = "file"
	}
	return g.call(ctx, func(ctx context.Context) error {
		_, err := g.api.UploadFileContext(ctx, slack.UploadFileParameters{Reader: bytes.NewReader(f.Data),
			FileSize: len(f.Data), Filename: name, Title: name, Channel: ch})
		return err
	})
}
