package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/turn"
)

// Telegram's limits on what a bot uploads (the public Bot API).
const (
	maxPhotoBytes    = 10 << 20
	maxDocumentBytes = 50 << 20
)

// ErrFileTooLarge is wrapped by SendFile and Download when a file is over
// the limit that applies.
var ErrFileTooLarge = errors.New("file too large")

var _ adapter.FileSender = (*Gateway)(nil)

// SendFile uploads a file to a chat: png, jpg, gif and webp images up to
// 10 MB as a photo, anything else (or a larger image) as a document up to
// 50 MB. replyTo ("" for none) threads it, in the forum topic of the
// message it names (see topic.go). A photo Telegram cannot process is sent
// again as a document.
func (g *Gateway) SendFile(ctx context.Context, chatID string, f turn.File, replyTo string) error {
	chat, err := strconv.ParseInt(chatID, 10, 64)
	if err != nil {
		return fmt.Errorf("telegram: invalid chat id %q", chatID)
	}
	to, reply, ok := g.targetOf(chat, replyTo)
	if !ok {
		return fmt.Errorf("telegram: invalid reply-to message id %q", replyTo)
	}
	return g.sendFile(ctx, to, f, reply.id)
}

// sendFile is SendFile to a target, replying to the message reply (0:
// none).
func (g *Gateway) sendFile(ctx context.Context, to target, f turn.File, reply int) error {
	name := filepath.Base(f.Name)
	if name == "." || name == string(filepath.Separator) || name == "" {
		name = "file"
	}
	size := len(f.Data)
	switch {
	case size == 0:
		return fmt.Errorf("telegram: send %s: the file is empty, and Telegram takes no empty files", name)
	case size > maxDocumentBytes:
		return fmt.Errorf("telegram: send %s: %w: %s is over Telegram's 50 MB upload limit for bots", name, ErrFileTooLarge, megabytes(int64(size)))
	}
	file := tgbotapi.BaseFile{
		BaseChat: tgbotapi.BaseChat{ChatID: to.chat, ReplyToMessageID: reply, AllowSendingWithoutReply: reply != 0},
		File:     tgbotapi.FileBytes{Name: name, Bytes: f.Data},
	}
	// Reliably, as a chunk of text is (see postReliably): a file the agent
	// sent is part of its answer, and one passing 5xx or dropped
	// connection must not lose it. FileBytes gives each try a fresh reader
	// of the whole file.
	if isImage(name) && size <= maxPhotoBytes {
		_, err := g.postReliablyFor(ctx, to, fileCall("sendPhoto", "photo", file, to.topic), uploadTimeout)
		if err == nil || !isAPIError(err, "image_process_failed") && !isAPIError(err, "photo_invalid_dimensions") {
			return wrapSend(name, err)
		}
		g.log.Debug("Telegram refused the image as a photo; sending it as a document", logkey.Err, err)
	}
	_, err := g.postReliablyFor(ctx, to, fileCall("sendDocument", "document", file, to.topic), uploadTimeout)
	return wrapSend(name, err)
}

func wrapSend(name string, err error) error {
	if err != nil {
		return fmt.Errorf("telegram: send %s: %w", name, err)
	}
	return nil
}

func isImage(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".png", ".jpg", ".jpeg", ".gif", ".webp":
		return true
	}
	return false
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }

// Download fetches an attachment: getFile, then a GET of
// <api_url>/file/bot<token>/<file_path>, streamed into w. It refuses a file
// announced larger than max and stops with ErrFileTooLarge as soon as more
// than max bytes arrive; w may then hold a partial file, which the caller
// discards. Errors never contain the token.
func (g *Gateway) Download(ctx context.Context, a adapter.Attachment, w io.Writer, max int64) error {
	tooLarge := func(size int64) error {
		return fmt.Errorf("telegram: download: %w: %s, the limit is %s", ErrFileTooLarge, megabytes(size), megabytes(max))
	}
	if a.Size > max {
		return tooLarge(a.Size)
	}
	b, err := g.bot(ctx)
	if err != nil {
		return err
	}
	file, err := b.GetFile(tgbotapi.FileConfig{FileID: a.ID})
	if err != nil {
		err = g.scrub(err)
		if isAPIError(err, "file is too big") {
			return fmt.Errorf("telegram: download: %w: Telegram serves bots files up to 20 MB", ErrFileTooLarge)
		}
		return fmt.Errorf("telegram: getFile: %w", err)
	}
	if int64(file.FileSize) > max {
		return tooLarge(int64(file.FileSize))
	}
	if file.FilePath == "" {
		return errors.New("telegram: getFile gave no file path")
	}
	return g.scrub(g.fetchFile(ctx, file.FilePath, w, max, tooLarge))
}

// fetchFile GETs a file path from the file endpoint into w, at most max
// bytes.
func (g *Gateway) fetchFile(ctx context.Context, path string, w io.Writer, max int64, tooLarge func(int64) error) error {
	ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.cfg.APIURL+"/file/bot"+g.cfg.Token+"/"+strings.Join(segs, "/"), nil)
	if err != nil {
		return fmt.Errorf("telegram: download: %w", err)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return fmt.Errorf("telegram: download: %w", g.scrub(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("telegram: download: the Bot API answered HTTP %s", resp.Status)
	}
	if resp.ContentLength > max {
		return tooLarge(resp.ContentLength)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, max))
	if err != nil {
		return fmt.Errorf("telegram: download: %w", err)
	}
	if n == max {
		// Exactly max arrived: anything more means the file is larger.
		var one [1]byte
		if k, _ := io.ReadFull(resp.Body, one[:]); k > 0 {
			return fmt.Errorf("telegram: download: %w: more than %s arrived", ErrFileTooLarge, megabytes(max))
		}
	}
	return nil
}
