package tools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// InboxDir is where files sent from the chat land, inside the workspace.
const InboxDir = "inbox"

// SaveInbox stores a file sent from the chat under inbox/ with a sanitized,
// unique name derived from name, writing it through the workspace root.
// fill writes the content; if it fails the partial file is removed. It
// returns the workspace-relative path.
func (w *Workspace) SaveInbox(name string, fill func(io.Writer) error) (string, error) {
	if err := w.root.MkdirAll(InboxDir, 0o700); err != nil {
		return "", fsError("mkdir", InboxDir, err)
	}
	base := time.Now().UTC().Format("20060102-150405-") + SanitizeName(name)
	for i := 0; i < 100; i++ {
		candidate := base
		if i > 0 {
			ext := path.Ext(base)
			candidate = fmt.Sprintf("%s-%d%s", strings.TrimSuffix(base, ext), i, ext)
		}
		rel := path.Join(InboxDir, candidate)
		f, err := w.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fsError("create", rel, err)
		}
		err = fill(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			w.root.Remove(rel)
			return "", err
		}
		return rel, nil
	}
	return "", fmt.Errorf("no free name for %q in %s", name, InboxDir)
}

// SanitizeName turns a file name chosen by someone else into a safe base
// name: no directories, no leading dots, only letters and digits (of any
// script: "отчёт.pdf" stays readable), combining marks, '.', '-' and '_',
// at most 80 bytes, keeping the extension. Anything else (spaces, quotes,
// controls, bidi overrides) becomes '_'. A stem left empty becomes "file",
// so "★★.pdf" is "file.pdf", not an extensionless "pdf".
func SanitizeName(name string) string {
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	stem, ext := name, path.Ext(name)
	if ext == name || len(ext) > 16 {
		ext = "" // ".bashrc" is a name, not an extension; a long one is kept in the stem
	}
	stem = strings.TrimLeft(safeRunes(stem[:len(stem)-len(ext)]), "._")
	if ext = safeRunes(ext); strings.Trim(ext, "._") == "" {
		ext = ""
	}
	for len(stem) > maxNameLen-len(ext) {
		_, size := utf8.DecodeLastRuneInString(stem)
		stem = stem[:len(stem)-size]
	}
	if stem == "" {
		stem = "file"
	}
	return stem + ext
}

// maxNameLen bounds a sanitized name, in bytes.
const maxNameLen = 80

// safeRunes replaces every rune of s that SanitizeName does not keep
// with '_'.
func safeRunes(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.Is(unicode.Mn, r), r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
