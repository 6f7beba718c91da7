package telegramtest

import (
	"bytes"
	"encoding/binary"
	"image"
	_ "image/gif" // decoders for imageSize
	_ "image/jpeg"
	_ "image/png"
)

// Telegram's rules for a photo a bot sends (sendPhoto): at most 10 MB, a
// width and height that add up to at most 10,000, and sides no more than
// 20 times apart.
const (
	maxPhotoSides = 10000
	maxPhotoRatio = 20
)

// photoDimensionsOK applies the rules on a photo's width and height.
func photoDimensionsOK(w, h int) bool {
	return w > 0 && h > 0 && w+h <= maxPhotoSides && max(w, h) <= maxPhotoRatio*min(w, h)
}

// imageSize reads an image's width and height from its header, as Telegram
// must before it takes a photo. PNG, JPEG and GIF are read by the
// standard library (this package is a test double, never linked into
// latch); WebP, which it cannot read, by webpSize. ok is false for
// anything else, which the fake then refuses as a photo.
func imageSize(data []byte) (w, h int, ok bool) {
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
		return cfg.Width, cfg.Height, true
	}
	return webpSize(data)
}

// webpSize reads the canvas size of a WebP file: lossy ("VP8 "), lossless
// ("VP8L") or extended ("VP8X") (RFC 9649).
func webpSize(b []byte) (w, h int, ok bool) {
	if len(b) < 30 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return 0, 0, false
	}
	le24 := func(p []byte) int { return int(p[0]) | int(p[1])<<8 | int(p[2])<<16 }
	switch string(b[12:16]) {
	case "VP8X":
		return 1 + le24(b[24:27]), 1 + le24(b[27:30]), true
	case "VP8L":
		if b[20] != 0x2f {
			return 0, 0, false
		}
		bits := binary.LittleEndian.Uint32(b[21:25])
		return 1 + int(bits&0x3fff), 1 + int(bits>>14&0x3fff), true
	case "VP8 ":
		if !bytes.Equal(b[23:26], []byte{0x9d, 0x01, 0x2a}) {
			return 0, 0, false
		}
		return int(binary.LittleEndian.Uint16(b[26:28]) & 0x3fff), int(binary.LittleEndian.Uint16(b[28:30]) & 0x3fff), true
	}
	return 0, 0, false
}
