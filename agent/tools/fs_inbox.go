package tools

import (
	"crypto/rand"
	"encoding/hex"
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

	"golang.org/x/sys/unix"
)

// InboxDir is where files sent from the chat land, inside the workspace.
const InboxDir = "inbox"

// partPrefix starts the name of a file being downloaded into the inbox. A
// file only gets its own name once it is complete, so a crash mid-download
// leaves a part file, which CleanInbox removes, never a truncated file
// under a name the agent or the owner could take for the real one.
const partPrefix = ".part-"

// DiskReserve is the free space a download must leave on the workspace's
// file system: the chat must not be able to fill the owner's disk.
const DiskReserve = 512 << 20

// ErrInboxFull means a file sent from the chat was not saved because the
// inbox or the disk has no room for it; the error says which and how much.
var ErrInboxFull = errors.New("no room for the file")

// LimitInbox caps the bytes of all files in the inbox; 0 means no cap but
// the disk's (DiskReserve). Set it before files arrive.
func (w *Workspace) LimitInbox(max int64) {
	w.inboxMax = max
}

// CleanInbox removes the part files of downloads that a crash or a kill
// cut short. Call it before files arrive.
func (w *Workspace) CleanInbox() error {
	entries, err := fs.ReadDir(w.root.FS(), InboxDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fsError("read", InboxDir, err)
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), partPrefix) && e.Type().IsRegular() {
			errs = append(errs, w.root.Remove(path.Join(InboxDir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// SaveInbox stores a file sent from the chat under inbox/ with a sanitized,
// unique name derived from name, writing it through the workspace root.
// size is the size the chat announced, 0 if unknown. fill writes the
// content into a part file, which gets its name only once fill succeeded
// and it is on disk; if fill fails it is removed. A file that would take
// the inbox past its cap (LimitInbox) or leave less than DiskReserve free
// is refused before it is downloaded, or as soon as it outgrows the room,
// with an error wrapping ErrInboxFull. It returns the workspace-relative
// path.
func (w *Workspace) SaveInbox(name string, size int64, fill func(io.Writer) error) (string, error) {
	if err := w.root.MkdirAll(InboxDir, 0o700); err != nil {
		return "", fsError("mkdir", InboxDir, err)
	}
	room, err := w.inboxRoom()
	if err != nil {
		return "", err
	}
	if size > room.bytes {
		return "", room.full(size)
	}
	part, f, err := w.createPart()
	if err != nil {
		return "", err
	}
	defer w.root.Remove(part)
	err = fill(&roomWriter{w: f, room: room})
	if err == nil {
		err = f.Sync() // the name below must never name a file still short of its data
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	base := time.Now().UTC().Format("20060102-150405-") + SanitizeName(name)
	for i := 0; i < 100; i++ {
		candidate := base
		if i > 0 {
			ext := path.Ext(base)
			candidate = fmt.Sprintf("%s-%d%s", strings.TrimSuffix(base, ext), i, ext)
		}
		rel := path.Join(InboxDir, candidate)
		// A link, unlike a rename, never replaces a file already there.
		err := w.root.Link(part, rel)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fsError("link", rel, err)
		}
		return rel, nil
	}
	return "", fmt.Errorf("no free name for %q in %s", name, InboxDir)
}

// createPart creates a part file with a random name in the inbox.
func (w *Workspace) createPart() (string, *os.File, error) {
	var r [8]byte
	_, _ = rand.Read(r[:])
	part := path.Join(InboxDir, partPrefix+hex.EncodeToString(r[:]))
	f, err := w.root.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", nil, fsError("create", part, err)
	}
	return part, f, nil
}

// inboxRoom is how much a new file may take: what the cap leaves beside
// the files in the inbox, and what the disk has beyond DiskReserve.
type inboxRoom struct {
	bytes         int64
	used, max     int64 // the inbox's files and cap (0: none)
	avail         int64 // free on the disk
	reserve       int64 // what must stay free there
	limitedByDisk bool
}

func (w *Workspace) inboxRoom() (inboxRoom, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(w.dir, &st); err != nil {
		return inboxRoom{}, fmt.Errorf("free space of the workspace: %w", err)
	}
	r := inboxRoom{max: w.inboxMax, avail: int64(st.Bavail) * int64(st.Bsize), reserve: w.lim.diskReserve}
	r.bytes, r.limitedByDisk = r.avail-r.reserve, true
	if r.max > 0 {
		entries, err := fs.ReadDir(w.root.FS(), InboxDir)
		if err != nil {
			return inboxRoom{}, fsError("read", InboxDir, err)
		}
		for _, e := range entries {
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
				r.used += info.Size()
			}
		}
		if left := r.max - r.used; left < r.bytes {
			r.bytes, r.limitedByDisk = left, false
		}
	}
	r.bytes = max(r.bytes, 0)
	return r, nil
}

// full is the error for a file of size bytes (0: unknown) that does not fit.
func (r inboxRoom) full(size int64) error {
	what := "the file"
	if size > 0 {
		what = fmt.Sprintf("a file of %s", mib(size))
	}
	if r.limitedByDisk {
		return fmt.Errorf("%w: %s would leave less than %s free on the workspace's disk (%s free)", ErrInboxFull, what, mib(r.reserve), mib(r.avail))
	}
	return fmt.Errorf("%w: %s does not fit in the inbox (%s of its %s used; delete files in %s/ or raise agent.inbox_max_mb)", ErrInboxFull, what, mib(r.used), mib(r.max), InboxDir)
}

func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// roomWriter fails a download that outgrows its room, whatever size the
// chat announced.
type roomWriter struct {
	w       io.Writer
	room    inboxRoom
	written int64
}

func (rw *roomWriter) Write(p []byte) (int, error) {
	if rw.written+int64(len(p)) > rw.room.bytes {
		return 0, rw.room.full(0)
	}
	n, err := rw.w.Write(p)
	rw.written += int64(n)
	return n, err
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
