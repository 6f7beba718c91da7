package telegram

import (
	"errors"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// call is one Bot API request that posts into a chat. go-telegram-bot-api
// v5.5.1 predates forum topics: its config types have no
// message_thread_id, and the parameters they make are unexported. So what
// may go to a topic — messages, files, chat actions — is built here as raw
// parameters from the library's configs and made with MakeRequest or
// UploadFiles; edits, which name their message and so need no topic, go
// through the library as they are (libCall).
type call struct {
	lib    tgbotapi.Chattable // set: made with Request, the rest unused
	method string
	params tgbotapi.Params
	files  []tgbotapi.RequestFile
	err    error // building the parameters failed
}

// libCall is a call the library makes from its own config.
func libCall(c tgbotapi.Chattable) call { return call{lib: c} }

func (c call) do(b *tgbotapi.BotAPI) (*tgbotapi.APIResponse, error) {
	switch {
	case c.err != nil:
		return nil, c.err
	case c.lib != nil:
		return b.Request(c.lib)
	case len(c.files) > 0:
		resp, err := b.UploadFiles(c.method, c.params, c.files)
		return resp, withCode(resp, err)
	}
	return b.MakeRequest(c.method, c.params)
}

// withCode gives an upload's error the error_code of Telegram's answer:
// the library's UploadFiles leaves Error.Code unset (MakeRequest sets
// it), and without it a 5xx would not be known as one to try again, nor a
// 4xx as the verdict on the file.
func withCode(resp *tgbotapi.APIResponse, err error) error {
	var apiErr *tgbotapi.Error
	if resp != nil && errors.As(err, &apiErr) && apiErr.Code == 0 {
		apiErr.Code = resp.ErrorCode
	}
	return err
}

// chatParams are the parameters of BaseChat as the library sets them, with
// message_thread_id for a topic.
func chatParams(c tgbotapi.BaseChat, topic int) (tgbotapi.Params, error) {
	p := tgbotapi.Params{}
	if err := p.AddFirstValid("chat_id", c.ChatID, c.ChannelUsername); err != nil {
		return nil, err
	}
	p.AddNonZero("message_thread_id", topic)
	p.AddNonZero("reply_to_message_id", c.ReplyToMessageID)
	p.AddBool("disable_notification", c.DisableNotification)
	p.AddBool("allow_sending_without_reply", c.AllowSendingWithoutReply)
	return p, p.AddInterface("reply_markup", c.ReplyMarkup)
}

// sendCall is sendMessage of cfg into a topic (0: none).
func sendCall(cfg tgbotapi.MessageConfig, topic int) call {
	p, err := chatParams(cfg.BaseChat, topic)
	if err != nil {
		return call{err: err}
	}
	p.AddNonEmpty("text", cfg.Text)
	p.AddBool("disable_web_page_preview", cfg.DisableWebPagePreview)
	p.AddNonEmpty("parse_mode", cfg.ParseMode)
	if err := p.AddInterface("entities", cfg.Entities); err != nil {
		return call{err: err}
	}
	return call{method: "sendMessage", params: p}
}

// fileCall uploads f with method (sendPhoto, sendDocument) under field
// (photo, document) into a topic, without a caption.
func fileCall(method, field string, f tgbotapi.BaseFile, topic int) call {
	p, err := chatParams(f.BaseChat, topic)
	if err != nil {
		return call{err: err}
	}
	return call{method: method, params: p, files: []tgbotapi.RequestFile{{Name: field, Data: f.File}}}
}

// actionCall is sendChatAction in a target.
func actionCall(to target, action string) call {
	p, err := chatParams(tgbotapi.BaseChat{ChatID: to.chat}, to.topic)
	if err != nil {
		return call{err: err}
	}
	p["action"] = action
	return call{method: "sendChatAction", params: p}
}
