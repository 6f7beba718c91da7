package tools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
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

// minFileBytes is the least a file counts for against the inbox's cap: an
// empty file still costs the disk an inode and a directory entry, and
// thousands of them must not be free.
const minFileBytes = 4096

// inboxState is what the downloads into the inbox share: one room, so that
// downloads running at once stay together within the cap and the disk's
// reserve.
type inboxState struct {
	mu     sync.Mutex
	max    int64     // see LimitInbox
	room   inboxRoom // measured when no download was in flight, then kept by the claims
	active int       // downloads in flight
	// syncDir syncs the inbox directory; nil means (*os.File).Sync. Tests
	// count the calls.
	syncDir func(*os.File) error
}

// LimitInbox caps the bytes of all files in the inbox; 0 means no cap but
// the disk's (DiskReserve). Set it before files arrive.
func (w *Workspace) LimitInbox(max int64) {
	w.inbox.mu.Lock()
	defer w.inbox.mu.Unlock()
	w.inbox.max = max
}

// CleanInbox removes the part files of downloads that a crash or a kill
// cut short. Call it before files arrive.
func (w *Workspace) CleanInbox() error {
	// Only a real inbox is ours to clean: through a symlink, inbox/ could
	// name the owner's src/, whose files merely look like part files.
	info, err := w.root.Lstat(InboxDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fsError("stat", InboxDir, err)
	}
	if !info.IsDir() {
		return nil
	}
	entries, err := fs.ReadDir(w.root.FS(), InboxDir)
	if err != nil {
		return fsError("read", InboxDir, err)
	}
	var errs []error
	for _, e := range entries {
		if isPartName(e.Name()) && e.Type().IsRegular() {
			errs = append(errs, w.root.Remove(path.Join(InboxDir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// isPartName reports whether name is one createPart makes; no other file
// is CleanInbox's to remove.
func isPartName(name string) bool {
	r, ok := strings.CutPrefix(name, partPrefix)
	return ok && len(r) == 16 && strings.Trim(r, "0123456789abcdef") == ""
}

// SaveInbox stores a file sent from the chat under inbox/ with a sanitized,
// unique name derived from name, writing it through the workspace root.
// size is the size the chat announced, 0 if unknown. fill writes the
// content into a part file, which gets its name only once fill succeeded
// and it is on disk; if fill fails it is removed. A file that would take
// the inbox past its cap (LimitInbox) or leave less than DiskReserve free,
// counting the downloads in flight, is refused before it is downloaded, or
// as soon as it outgrows the room, with an error wrapping ErrInboxFull. It
// returns the workspace-relative path.
func (w *Workspace) SaveInbox(name string, size int64, fill func(io.Writer) error) (string, error) {
	if err := w.root.MkdirAll(InboxDir, 0o700); err != nil {
		return "", fsError("mkdir", InboxDir, err)
	}
	dir, err := w.root.Open(InboxDir)
	if err != nil {
		return "", fsError("open", InboxDir, err)
	}
	defer dir.Close()
	size = max(size, 0) // a negative size must not lend room to other downloads
	if err := w.inbox.start(size, func() (inboxRoom, error) { return w.measureInbox(dir) }); err != nil {
		return "", err
	}
	pw := &partWriter{in: &w.inbox, held: size}
	defer pw.end() // runs after the part file is removed
	pw.name, pw.f, err = w.createPart()
	if err != nil {
		return "", err
	}
	defer w.root.Remove(pw.name)
	if err := pw.fill(fill); err != nil {
		return "", err
	}
	rel, err := w.linkPart(pw.name, name)
	if err != nil {
		return "", err
	}
	// The chat is told the file is saved: its name must survive a crash.
	syncDir := (*os.File).Sync
	if w.inbox.syncDir != nil {
		syncDir = w.inbox.syncDir
	}
	if err := syncDir(dir); err != nil {
		w.root.Remove(rel)
		return "", fsError("sync", InboxDir, err)
	}
	pw.kept = true
	return rel, nil
}

// linkPart gives the complete part file its name in the inbox, derived
// from name, and returns it.
func (w *Workspace) linkPart(part, name string) (string, error) {
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
	part := path.Join(InboxDir, partPrefix+randomHex(8))
	f, err := w.root.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", nil, fsError("create", part, err)
	}
	return part, f, nil
}

// inboxRoom is what the inbox may still take: what its cap leaves beside
// its files, and what the disk has beyond the reserve.
type inboxRoom struct {
	used, max int64 // the inbox's files and cap (0: none)
	avail     int64 // free on the disk
	reserve   int64 // what must stay free there
}

// measureInbox measures the room of the inbox open as dir: the file system
// it is really on, and the space its files take on disk.
func (w *Workspace) measureInbox(dir *os.File) (inboxRoom, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(dir.Fd()), &st); err != nil {
		return inboxRoom{}, fmt.Errorf("free space of the inbox's disk: %w", err)
	}
	r := inboxRoom{max: w.inbox.max, avail: int64(st.Bavail) * int64(st.Frsize), reserve: w.lim.diskReserve}
	if r.max == 0 {
		return r, nil
	}
	entries, err := fs.ReadDir(w.root.FS(), InboxDir)
	if err != nil {
		return inboxRoom{}, fsError("read", InboxDir, err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		n := info.Size()
		if sys, ok := info.Sys().(*syscall.Stat_t); ok {
			n = int64(sys.Blocks) * 512 // allocated, not apparent, size
		}
		r.used += max(n, minFileBytes)
	}
	return r, nil
}

// take claims n bytes of the room, if they fit.
func (r *inboxRoom) take(n int64) bool {
	left := r.avail - r.reserve
	if r.max > 0 {
		left = min(left, r.max-r.used)
	}
	if n > left {
		return false
	}
	r.used += n
	r.avail -= n
	return true
}

// full is the error for a file of size bytes (0: unknown) that does not fit.
func (r inboxRoom) full(size int64) error {
	what := "the file"
	if size > 0 {
		what = fmt.Sprintf("a file of %s", mib(size))
	}
	if r.max == 0 || r.avail-r.reserve <= r.max-r.used {
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

// start claims size bytes of the room for a new download. With no other
// download in flight it measures the room first; one in flight already
// counts, by what it claimed, in the room kept since.
func (in *inboxState) start(size int64, measure func() (inboxRoom, error)) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.active == 0 {
		r, err := measure()
		if err != nil {
			return err
		}
		in.room = r
	}
	if !in.room.take(size) {
		return in.room.full(size)
	}
	in.active++
	return nil
}

// partWriter writes a download into its part file, claiming room as it
// grows past what it announced: a download that outgrows the room fails,
// whatever size the chat announced.
type partWriter struct {
	in      *inboxState
	f       *os.File
	name    string // of the part file, workspace-relative
	held    int64  // bytes claimed
	written int64
	kept    bool // the file got its name
}

func (pw *partWriter) Write(p []byte) (int, error) {
	if more := pw.written + int64(len(p)) - pw.held; more > 0 {
		pw.in.mu.Lock()
		ok := pw.in.room.take(more)
		room := pw.in.room
		pw.in.mu.Unlock()
		if !ok {
			return 0, room.full(0)
		}
		pw.held += more
	}
	n, err := pw.f.Write(p)
	pw.written += int64(n)
	if err != nil {
		return n, fsError("write", pw.name, err)
	}
	return n, nil
}

// fill runs fill on the part file and brings it to disk. Errors name the
// file by its workspace path: the os package's name for it is a host path.
func (pw *partWriter) fill(fill func(io.Writer) error) error {
	err := fill(pw)
	if err == nil {
		// The name the file gets next must never name a file still short of its data.
		if serr := pw.f.Sync(); serr != nil {
			err = fsError("sync", pw.name, serr)
		}
	}
	if cerr := pw.f.Close(); cerr != nil && err == nil {
		err = fsError("close", pw.name, cerr)
	}
	return err
}

// end gives back the room the download claimed but does not keep.
func (pw *partWriter) end() {
	unused := pw.held
	if pw.kept {
		unused -= pw.written
	}
	pw.in.mu.Lock()
	defer pw.in.mu.Unlock()
	pw.in.room.used -= unused
	pw.in.room.avail += unused
	pw.in.active--
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
