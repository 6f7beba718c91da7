package discordtest

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"testing"
)

// TestForwardStickerPollOnTheWire: a forward is a message of its own with
// a message_reference of type 1 and the original in message_snapshots;
// stickers come as sticker_items and a poll as poll. A guild message the
// bot may not read (no Message Content, no mention) shows neither the
// snapshot's content and files nor the poll.
func TestForwardStickerPollOnTheWire(t *testing.T) {
	s := newServer(t)
	fwd := s.Post(Post{Author: alice, Forward: &Snapshot{Content: "look", Files: []File{{Name: "a.txt", Data: []byte("a")}},
		Stickers: []Sticker{{ID: "1", Name: "Wave"}}, Flags: FlagVoiceMessage}})
	poll := s.Post(Post{Author: alice, Poll: &Poll{Question: "Lunch?", Answers: []string{"Pizza"}},
		Stickers: []Sticker{{ID: "2", Name: "Cat", FormatType: 3}}})

	var got struct {
		Content          string `json:"content"`
		MessageReference struct {
			Type      int    `json:"type"`
			MessageID string `json:"message_id"`
		} `json:"message_reference"`
		MessageSnapshots []struct {
			Message struct {
				Content      string           `json:"content"`
				Flags        int              `json:"flags"`
				Attachments  []wireAttachment `json:"attachments"`
				StickerItems []wireSticker    `json:"sticker_items"`
			} `json:"message"`
		} `json:"message_snapshots"`
		StickerItems []wireSticker `json:"sticker_items"`
		Poll         *wirePoll     `json:"poll"`
	}
	call(t, s, "GET", "channels/"+fwd.ChannelID+"/messages/"+fwd.ID, nil, true, &got)
	if got.Content != "" || got.MessageReference.Type != 1 || got.MessageReference.MessageID != fwd.Forwarded.MessageID ||
		len(got.MessageSnapshots) != 1 {
		t.Fatalf("forward = %+v, want no content, a FORWARD reference and one snapshot", got)
	}
	snap := got.MessageSnapshots[0].Message
	if snap.Content != "look" || snap.Flags != FlagVoiceMessage || len(snap.Attachments) != 1 ||
		snap.Attachments[0].URL != fwd.Forwarded.Attachments[0].URL || len(snap.StickerItems) != 1 || snap.StickerItems[0].FormatType != 1 {
		t.Errorf("snapshot = %+v", snap)
	}
	call(t, s, "GET", "channels/"+poll.ChannelID+"/messages/"+poll.ID, nil, true, &got)
	if got.Poll == nil || got.Poll.Question.Text != "Lunch?" || len(got.Poll.Answers) != 1 || got.Poll.Answers[0].Media.Text != "Pizza" ||
		len(got.StickerItems) != 1 || got.StickerItems[0].Name != "Cat" || got.StickerItems[0].FormatType != 3 {
		t.Errorf("poll message = %+v", got)
	}

	s.SetPrivilegedIntents(false)
	hidden := s.Post(Post{Author: alice, GuildID: "800000000000000001", ChannelID: "800000000000000002",
		Forward: &Snapshot{Content: "secret", Files: []File{{Name: "b.txt", Data: []byte("b")}}}, Poll: &Poll{Question: "Q?"}})
	got.MessageSnapshots, got.Poll = nil, nil
	call(t, s, "GET", "channels/"+hidden.ChannelID+"/messages/"+hidden.ID, nil, true, &got)
	if len(got.MessageSnapshots) != 1 || got.MessageSnapshots[0].Message.Content != "" ||
		len(got.MessageSnapshots[0].Message.Attachments) != 0 || got.Poll != nil {
		t.Errorf("unreadable guild forward = %+v, want its snapshot blank and no poll", got)
	}
}

// TestAttachmentServing: a file is served with its Content-Length, or
// chunked without one; the attachment announces the size the test chose.
func TestAttachmentServing(t *testing.T) {
	s := newServer(t)
	data := bytes.Repeat([]byte("z"), 100) // small enough that net/http would send its length
	m := s.SendDM(alice, "", File{Name: "plain.bin", Data: data}, File{Name: "chunked.bin", Data: data, Announced: 7, Chunked: true})
	if m.Attachments[0].Size != len(data) || m.Attachments[1].Size != 7 {
		t.Errorf("announced sizes %d and %d, want %d and 7", m.Attachments[0].Size, m.Attachments[1].Size, len(data))
	}
	for i, wantLen := range []int64{int64(len(data)), -1} {
		resp, err := http.Get(m.Attachments[i].URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ContentLength != wantLen || !bytes.Equal(body, data) {
			t.Errorf("%s: Content-Length %d, %d bytes; want %d and the whole file", m.Attachments[i].Filename, resp.ContentLength, len(body), wantLen)
		}
	}
}

// TestUploadLimitPerFile: the upload limit applies to each file, not to
// the request: two files under it pass together, one over it is 413.
func TestUploadLimitPerFile(t *testing.T) {
	s := newServer(t)
	s.SetMaxUpload(100)
	ch := s.DMChannel(alice)
	upload := func(sizes ...int) int {
		var body bytes.Buffer
		w := multipart.NewWriter(&body)
		_ = w.WriteField("payload_json", `{"allowed_mentions":{"parse":[]}}`)
		for i, n := range sizes {
			part, _ := w.CreateFormFile("files["+strconv.Itoa(i)+"]", "f.bin")
			_, _ = part.Write(bytes.Repeat([]byte("u"), n))
		}
		_ = w.Close()
		req, _ := http.NewRequest("POST", s.URL()+"/api/v10/channels/"+ch+"/messages", &body)
		req.Header.Set("Content-Type", w.FormDataContentType())
		req.Header.Set("Authorization", "Bot "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := upload(80, 80); code != http.StatusOK {
		t.Errorf("two files of 80 bytes under a 100-byte limit: %d, want 200", code)
	}
	if code := upload(10, 101); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a file of 101 bytes: %d, want 413", code)
	}
	if sent := s.Sent(); len(sent) != 1 || len(sent[0].Files) != 2 {
		t.Errorf("sent %+v, want the one message with two files", sent)
	}
}
