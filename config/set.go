package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

// ErrUnknownKey is returned by [Set] for a key config.toml does not have,
// or one that names a table rather than a setting.
var ErrUnknownKey = errors.New("not a setting of config.toml")

// Secret reports whether key holds a secret, whose value is never shown.
func Secret(key string) bool {
	for _, p := range Platforms {
		for _, s := range p.Secrets {
			if key == p.Name+"."+s.Key {
				return true
			}
		}
	}
	return key == "agent.api_key" || key == "transcribe.api_key"
}

// Set sets key (as config.toml spells it, "telegram.token") to value in
// home/config.toml and returns the file's path. The value is read as the
// key's type: a string as it is, true/false, a whole number, or for a list
// its items separated by commas.
//
// The rest of the file is kept byte for byte: the key's line is replaced
// where it is, or added under its table's header, or with a new header at
// the end. The result must load as [Load] would load it, or the file is
// left as it was; it is replaced atomically with the mode it had (0600
// for a new file), so a crash leaves the old file or the new one, never
// half of either. No error repeats a secret.
//
// Setting telegram.webhook_url in a file without a webhook_secret adds a
// random one with it, as webhook mode needs one.
func Set(home, key, value string) (SetResult, error) {
	res := SetResult{Path: filepath.Join(home, ConfigFile)}
	if real, err := filepath.EvalSymlinks(res.Path); err == nil {
		res.Path = real // a config.toml that links elsewhere is changed where it lives
	}
	secrets := []string{value, strings.TrimSpace(value)}
	if err := set(home, key, value, &res, &secrets); err != nil {
		return res, redact(err, secrets)
	}
	return res, nil
}

// SetResult is what [Set] changed.
type SetResult struct {
	Path               string // the file written
	AddedWebhookSecret bool   // a random telegram.webhook_secret came with telegram.webhook_url
}

func set(home, key, value string, res *SetResult, secrets *[]string) error {
	path := res.Path
	kind, ok := settingKind(key)
	if !ok {
		return fmt.Errorf("%q: %w (`latch config keys` lists them)", key, ErrUnknownKey)
	}
	typed, err := parseSetting(kind, value)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	data, fi, err := readFile(path, maxConfigSize)
	perm := os.FileMode(0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = nil
	case err != nil:
		return fmt.Errorf("read config: %w", err)
	default:
		if err := checkOwner(path, fi); err != nil {
			return err
		}
		perm = fi.Mode().Perm()
		if perm&0o077 != 0 {
			return insecuref("%s is open to other users (mode %04o); fix it with: chmod 600 %s, then set %s again",
				path, perm, path, key)
		}
	}
	out, err := setLine(data, key, typed)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if key == "telegram.webhook_url" && value != "" {
		var fc fileConfig
		if _, err := toml.Decode(string(data), &fc); err == nil && fc.Telegram.WebhookSecret == "" {
			if out, err = setLine(out, "telegram.webhook_secret", NewWebhookSecret()); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			res.AddedWebhookSecret = true
		}
	}
	// The new file must load before it replaces the old one.
	tmp, err := writeTemp(path, out, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if _, err := (Loader{}).load(home, tmp, secrets); err != nil {
		return fmt.Errorf("config.toml would not load with %s set, so it is unchanged: %s", key,
			strings.ReplaceAll(err.Error(), tmp, path))
	}
	return os.Rename(tmp, path)
}

// Settings lists the keys [Set] takes, as config.toml spells them.
func Settings() []string {
	var keys []string
	for _, k := range schemaKeys {
		if _, ok := settingKind(k); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// settingKind is the reflect.Kind of key's field in fileConfig, found by
// its toml tags; ok is false for a key that is not a setting (a table, a
// misspelling).
func settingKind(key string) (reflect.Kind, bool) {
	if !knownKey(key) {
		return 0, false
	}
	if strings.HasPrefix(key, "agent.permissions.") {
		return reflect.String, true
	}
	t := reflect.TypeFor[fileConfig]()
	for _, part := range strings.Split(key, ".") {
		if t.Kind() != reflect.Struct {
			return 0, false
		}
		f, found := fieldByTag(t, part)
		if !found {
			return 0, false
		}
		t = f.Type
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	switch k := t.Kind(); k {
	case reflect.String, reflect.Bool, reflect.Int64:
		return k, true
	case reflect.Slice:
		return k, t.Elem().Kind() == reflect.String
	}
	return 0, false
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); f.Tag.Get("toml") == tag {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// parseSetting reads value as kind.
func parseSetting(kind reflect.Kind, value string) (any, error) {
	switch kind {
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("%s is not true or false", quoteValue(value))
		}
		return b, nil
	case reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not a whole number", quoteValue(value))
		}
		return n, nil
	case reflect.Slice:
		items := []string{}
		for s := range strings.SplitSeq(value, ",") {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, s)
			}
		}
		return items, nil
	}
	return value, nil
}

// tableHeader matches a table or array-of-tables header line; group 1 is
// "[" for an array of tables, group 2 the table's name.
var tableHeader = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[ \t]*\[(\[?)[ \t]*([A-Za-z0-9_.\- \t]+?)[ \t]*\]\]?[ \t]*(#.*)?$`)
})

// setLine returns data with key set to v: its line replaced, or added
// under its table's header, or after a new header at the end. The result is
// decoded to check that it says what was meant and that no other setting
// changed: a header inside a multi-line string, say, would fool the line
// scan.
func setLine(data []byte, key string, v any) ([]byte, error) {
	table, leaf := key[:strings.LastIndex(key, ".")], key[strings.LastIndex(key, ".")+1:]
	var line bytes.Buffer
	if err := toml.NewEncoder(&line).Encode(map[string]any{leaf: v}); err != nil {
		return nil, err
	}
	keyLine := regexp.MustCompile(`^[ \t]*` + regexp.QuoteMeta(leaf) + `[ \t]*=`)
	lines := strings.SplitAfter(string(data), "\n")
	header, at, current := -1, -1, ""
	for i, l := range lines {
		if m := tableHeader().FindStringSubmatch(strings.TrimRight(l, "\r\n")); m != nil {
			current = m[2]
			if m[1] != "" {
				current = "[[" + current // never the table we look for
			}
			if current == table && header < 0 {
				header = i
			}
			continue
		}
		if current == table && keyLine.MatchString(l) {
			at = i
		}
	}
	switch {
	case at >= 0:
		lines[at] = line.String()
	case header >= 0:
		lines = slices.Insert(lines, header+1, line.String())
	default:
		if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
			lines = append(lines, "\n")
		}
		lines = append(lines, "\n["+table+"]\n", line.String())
	}
	out := []byte(strings.Join(lines, ""))
	if err := sameButKey(data, out, key, v); err != nil {
		return nil, fmt.Errorf("could not find where to set %s (%v); edit the file by hand", key, err)
	}
	return out, nil
}

// sameButKey checks that after decodes like before except that key holds v.
func sameButKey(before, after []byte, key string, v any) error {
	var old, neu map[string]any
	if _, err := toml.Decode(string(before), &old); err != nil {
		return fmt.Errorf("the file does not parse now: %w", err)
	}
	if _, err := toml.Decode(string(after), &neu); err != nil {
		return errors.New("the edit would not parse")
	}
	parts := strings.Split(key, ".")
	setPath(old, parts, v)
	if !reflect.DeepEqual(normalise(old), normalise(neu)) {
		return errors.New("the edit would change other settings")
	}
	return nil
}

func setPath(m map[string]any, parts []string, v any) {
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// normalise makes decoded and hand-built values comparable: lists of any
// become lists of strings where they hold only strings.
func normalise(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalise(e)
		}
		return out
	case []any:
		ss := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return x
			}
			ss = append(ss, s)
		}
		return ss
	}
	return v
}

// writeTemp writes data to a new file next to path with mode perm, synced.
func writeTemp(path string, data []byte, perm os.FileMode) (name string, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".config-*.toml")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}
