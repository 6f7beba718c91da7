package telegramtest

import (
	"context"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Telegram's file limits for bots on the public Bot API.
const (
	// MaxDownload is the largest file getFile serves (20 MB).
	MaxDownload = 20 << 20
	// MaxPhotoUpload is the largest photo sendPhoto takes (10 MB).
	MaxPhotoUpload = 10 << 20
	// MaxDocumentUpload is the largest file sendDocument takes (50 MB).
	MaxDocumentUpload = 50 << 20
)

// storedFile is a file the server holds: uploaded by a user (AddFile) or
// by the bot.
type storedFile struct {
	id, unique, name, path string
	data                   []byte
	// announced is the size getFile and messages report; -1 means the
	// real size. A lie lets tests check that a client caps what it reads.
	announced int64
}

func (f *storedFile) size() int64 {
	if f.announced >= 0 {
		return f.announced
	}
	return int64(len(f.data))
}

// upload is one file part of a multipart request.
type upload struct {
	name, contentType string
	data              []byte
}

// uploadsKey carries a request's uploads to its handler.
type uploadsKey struct{}

func readUpload(fh *multipart.FileHeader) (upload, error) {
	f, err := fh.Open()
	if err != nil {
		return upload{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return upload{}, err
	}
	return upload{name: fh.Filename, contentType: fh.Header.Get("Content-Type"), data: data}, nil
}

// AddFile stores content as a file a user uploaded and returns its file_id,
// for DocumentOf, PhotoSizeOf, VoiceOf and AudioOf.
func (s *Server) AddFile(content []byte, name string) (fileID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addFileLocked(content, name).id
}

func (s *Server) addFileLocked(content []byte, name string) *storedFile {
	n := len(s.files) + 1
	f := &storedFile{
		id:        fmt.Sprintf("BQACAgIAAx0file%04d", n),
		unique:    fmt.Sprintf("AgAD%04d", n),
		name:      name,
		path:      fmt.Sprintf("documents/file_%d%s", n, path.Ext(name)),
		data:      slices.Clone(content),
		announced: -1,
	}
	s.files[f.id] = f
	return f
}

// SetAnnouncedSize makes getFile and later messages report size for a file
// instead of its real size (0: no size at all), and makes the download
// route send it without Content-Length.
func (s *Server) SetAnnouncedSize(fileID string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files[fileID]; f != nil {
		f.announced = size
	}
}

func (s *Server) file(fileID string) *storedFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[fileID]
	if f == nil {
		panic("telegramtest: unknown file id " + fileID)
	}
	return f
}

// DocumentOf describes an added file as a document attachment.
func (s *Server) DocumentOf(fileID string) *Document {
	f := s.file(fileID)
	return &Document{FileID: f.id, FileUniqueID: f.unique, FileName: f.name, MimeType: mimeOf(f.name), FileSize: f.size()}
}

// PhotoSizeOf describes an added file as one size of a photo.
func (s *Server) PhotoSizeOf(fileID string, width, height int) PhotoSize {
	f := s.file(fileID)
	return PhotoSize{FileID: f.id, FileUniqueID: f.unique, Width: width, Height: height, FileSize: f.size()}
}

// VoiceOf describes an added file as a voice note.
func (s *Server) VoiceOf(fileID string) *Voice {
	f := s.file(fileID)
	return &Voice{FileID: f.id, FileUniqueID: f.unique, Duration: 3, MimeType: "audio/ogg", FileSize: f.size()}
}

// AudioOf describes an added file as a music file.
func (s *Server) AudioOf(fileID string) *Audio {
	f := s.file(fileID)
	return &Audio{FileID: f.id, FileUniqueID: f.unique, Duration: 180, FileName: f.name, MimeType: mimeOf(f.name), FileSize: f.size()}
}

// SendDocument pushes a message with an added file as a document, as if a
// user had sent it, and returns its ids.
func (s *Server) SendDocument(chat Chat, from User, fileID, caption string) Delivered {
	return s.Deliver(Incoming{Chat: chat, From: &from, Caption: caption, Document: s.DocumentOf(fileID)})
}

func mimeOf(name string) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

func (s *Server) getFile(_ context.Context, p params) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[p["file_id"]]
	switch {
	case f == nil:
		return nil, badRequest("invalid file_id")
	case len(f.data) > MaxDownload:
		return nil, badRequest("file is too big")
	}
	out := map[string]any{"file_id": f.id, "file_unique_id": f.unique, "file_path": f.path}
	if f.size() > 0 {
		out["file_size"] = f.size()
	}
	return out, nil
}

// serveFile answers GET /file/bot<token>/<file_path>.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rest string) {
	token, filePath, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	s.downloads++
	s.notifyLocked()
	var f *storedFile
	if token == s.token {
		for _, sf := range s.files {
			if sf.path == filePath {
				f = sf
			}
		}
	}
	s.mu.Unlock()
	if f == nil || r.Method != http.MethodGet {
		writeError(w, &apiError{code: http.StatusNotFound, desc: "Not Found"})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if f.announced >= 0 {
		// Streamed without a length, so only counting tells the size.
		flusher, _ := w.(http.Flusher)
		for data := f.data; len(data) > 0; {
			n := min(len(data), 32<<10)
			if _, err := w.Write(data[:n]); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			data = data[n:]
		}
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	_, _ = w.Write(f.data)
}

// Downloads is how many requests reached the file download route.
func (s *Server) Downloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads
}

func (s *Server) sendDocument(ctx context.Context, p params) (any, *apiError) {
	return s.sendMedia(ctx, p, "sendDocument", "document", MaxDocumentUpload)
}

func (s *Server) sendPhoto(ctx context.Context, p params) (any, *apiError) {
	return s.sendMedia(ctx, p, "sendPhoto", "photo", MaxPhotoUpload)
}

// checkPhoto applies Telegram's rules to a photo and returns its size. The
// size in bytes is checked before the image is read, as Telegram does (with
// its words); then an image it cannot read fails IMAGE_PROCESS_FAILED, and
// one whose sides break the rules PHOTO_INVALID_DIMENSIONS.
func checkPhoto(data []byte) (width, height int, aerr *apiError) {
	if len(data) > MaxPhotoUpload {
		return 0, 0, badRequest("file of size %d bytes is too big for a photo; the maximum size is %d bytes", len(data), MaxPhotoUpload)
	}
	w, h, ok := imageSize(data)
	switch {
	case !ok:
		return 0, 0, badRequest("IMAGE_PROCESS_FAILED")
	case !photoDimensionsOK(w, h):
		return 0, 0, badRequest("PHOTO_INVALID_DIMENSIONS")
	}
	return w, h, nil
}

// sendMedia is sendDocument and sendPhoto: an uploaded file (multipart) or
// the file_id of one the server holds, an optional caption, reply and
// keyboard.
func (s *Server) sendMedia(ctx context.Context, p params, method, field string, maxSize int) (any, *apiError) {
	replyTo, aerr := p.int("reply_to_message_id", 0)
	if aerr != nil {
		return nil, aerr
	}
	uploads, _ := ctx.Value(uploadsKey{}).(map[string]upload)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, aerr := s.resolveChatLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	sent := &SentFile{Field: field}
	if u, ok := uploads[field]; ok {
		sent.Name, sent.ContentType, sent.Data = u.name, u.contentType, u.data
	} else if f := s.files[p[field]]; f != nil {
		sent.Name, sent.Data = f.name, slices.Clone(f.data)
		sent.Field = ""
	} else {
		return nil, badRequest("wrong file identifier/HTTP URL specified")
	}
	width, height := 0, 0
	switch {
	case len(sent.Data) == 0:
		return nil, badRequest("file must be non-empty")
	case field == "photo":
		if width, height, aerr = checkPhoto(sent.Data); aerr != nil {
			return nil, aerr
		}
	case len(sent.Data) > maxSize:
		return nil, &apiError{code: http.StatusRequestEntityTooLarge, desc: "Request Entity Too Large"}
	}
	var plain string
	var ents []Entity
	if p["caption"] != "" {
		if plain, ents, aerr = render(p["caption"], p["parse_mode"]); aerr != nil {
			return nil, aerr
		}
		if utf16Len(plain) > 1024 {
			return nil, badRequest("message caption is too long")
		}
	}
	kb, aerr := inlineKeyboard(p)
	if aerr != nil {
		return nil, aerr
	}
	if replyTo, aerr = replyTarget(c, p, replyTo); aerr != nil {
		return nil, aerr
	}
	topic, aerr := c.sendTopic(p, replyTo)
	if aerr != nil {
		return nil, aerr
	}
	stored := s.addFileLocked(sent.Data, sent.Name)
	sent.FileID = stored.id
	now := time.Now()
	m := &message{fromBot: true, date: now.Unix(), caption: plain, entities: ents, replyTo: int(replyTo), topic: topic, keyboard: kb}
	if field == "photo" {
		m.photo = []PhotoSize{{FileID: stored.id, FileUniqueID: stored.unique, Width: width, Height: height, FileSize: int64(len(sent.Data))}}
	} else {
		m.document = &Document{FileID: stored.id, FileUniqueID: stored.unique, FileName: sent.Name, MimeType: mimeOf(sent.Name), FileSize: int64(len(sent.Data))}
	}
	c.add(m)
	s.sentIndex[msgKey{c.chat.ID, m.id}] = len(s.sent)
	s.sent = append(s.sent, Sent{
		Method: method, ChatID: c.chat.ID, MessageID: m.id, Text: p["caption"], Plain: plain, Entities: ents,
		ParseMode: p["parse_mode"], ReplyTo: int(replyTo), ThreadID: threadParam(p), Topic: topic,
		Params: p.clone(), Keyboard: kb, File: sent, Time: now,
	})
	s.notifyLocked()
	return s.wireLocked(c, m, true), nil
}
