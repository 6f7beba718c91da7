package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/turn"
)

// ErrFileTooLarge is wrapped by Download for a file over the cap.
var ErrFileTooLarge = errors.New("the file is too large")

// encPrefix starts the Attachment.ID of an encrypted file: its "file"
// object (the mxc URL, the key and the hash) follows.
const encPrefix = "enc:"

// encryptedFile is an encrypted attachment's "file" object.
type encryptedFile struct {
	attachment.EncryptedFile
	URL id.ContentURIString `json:"url"`
}

// Download fetches an attachment from the homeserver's media repository,
// failing once more than max bytes arrive; an encrypted one is checked
// against its hash and decrypted.
func (g *Gateway) Download(ctx context.Context, a adapter.Attachment, w io.Writer, max int64) error {
	if a.Size > max {
		return fmt.Errorf("matrix: download: %w: %d bytes, the limit is %d", ErrFileTooLarge, a.Size, max)
	}
	mxc, ef := a.ID, (*encryptedFile)(nil)
	if rest, ok := strings.CutPrefix(a.ID, encPrefix); ok {
		ef = &encryptedFile{}
		if err := json.Unmarshal([]byte(rest), ef); err != nil {
			return errors.New("matrix: download: the encrypted file's key cannot be read")
		}
		mxc = string(ef.URL)
	}
	uri, err := id.ParseContentURI(mxc)
	if err != nil || uri.IsEmpty() {
		return errors.New("matrix: download: not an mxc:// URL")
	}
	var data []byte
	err = g.call(ctx, func(ctx context.Context) error {
		resp, err := g.cli.Download(ctx, uri)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err = io.ReadAll(io.LimitReader(resp.Body, max+1))
		return err
	})
	if err != nil {
		return err
	}
	if int64(len(data)) > max {
		return fmt.Errorf("matrix: download: %w: over %d bytes", ErrFileTooLarge, max)
	}
	if ef != nil {
		if err := ef.DecryptInPlace(data); err != nil {
			return fmt.Errorf("matrix: download: the encrypted file does not decrypt: %w", err)
		}
	}
	_, err = w.Write(data)
	return err
}

// SendFile uploads a file and posts it as m.image, m.audio, m.video or
// m.file by its type; in an encrypted room the upload is encrypted
// (AES-CTR, the key in the Megolm-encrypted event).
func (g *Gateway) SendFile(ctx context.Context, chat string, f turn.File, _ string) error {
	rid, err := roomOf(chat)
	if err != nil {
		return err
	}
	if len(f.Data) == 0 {
		return errors.New("matrix: an empty file cannot be uploaded")
	}
	name := path.Base(strings.ReplaceAll(f.Name, "\\", "/"))
	if name == "" || name == "." || name == "/" {
		name = "file"
	}
	mime := http.DetectContentType(f.Data)
	enc, err := g.encrypted(ctx, rid)
	if err != nil {
		return err
	}
	data, uploadType := f.Data, mime
	var ef *attachment.EncryptedFile
	if enc {
		ef = attachment.NewEncryptedFile()
		data, uploadType = ef.Encrypt(f.Data), "application/octet-stream"
	}
	var up *mautrix.RespMediaUpload
	err = g.call(ctx, func(ctx context.Context) (err error) {
		up, err = g.cli.UploadMedia(ctx, mautrix.ReqUploadMedia{ContentBytes: data, ContentType: uploadType, FileName: name})
		return err
	})
	if err != nil {
		return err
	}
	c := map[string]any{"msgtype": string(msgTypeOf(mime)), "body": name, "filename": name,
		"info": map[string]any{"mimetype": mime, "size": len(f.Data)}, "m.mentions": map[string]any{}}
	if ef != nil {
		c["file"] = encryptedFile{EncryptedFile: *ef, URL: up.ContentURI.CUString()}
	} else {
		c["url"] = up.ContentURI.CUString()
	}
	_, err = g.post(ctx, rid, c)
	return err
}

func msgTypeOf(mime string) event.MessageType {
	switch {
	case strings.HasPrefix(mime, "image/"):
		return event.MsgImage
	case strings.HasPrefix(mime, "audio/"):
		return event.MsgAudio
	case strings.HasPrefix(mime, "video/"):
		return event.MsgVideo
	}
	return event.MsgFile
}
