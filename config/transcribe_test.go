package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

const testTranscribeKey = "sk-transcribe-TESTkeyValue123"

func TestLoadTranscribe(t *testing.T) {
	file := func(body string, mode uint32) *cfgFile {
		return &cfgFile{content: "[transcribe]\n" + body + "\n", mode: os.FileMode(mode)}
	}
	runLoadTests(t, []loadCase{
		{name: "off by default", want: func(c *Config) {}},
		{name: "a local server, no key", config: file(`base_url = "http://127.0.0.1:8000/v1/"`+"\n"+`model = "Systran/faster-whisper-small"`+"\n"+`max_mb = 5`+"\n"+`max_duration = "2m"`, 0o600),
			want: func(c *Config) {
				c.Transcribe.BaseURL, c.Transcribe.Model = "http://127.0.0.1:8000/v1", "Systran/faster-whisper-small"
				c.Transcribe.MaxBytes, c.Transcribe.MaxDuration = 5<<20, 2*time.Minute
			}},
		{name: "key in the file", config: file(`base_url = "https://api.openai.com/v1"`+"\n"+`api_key = "`+testTranscribeKey+`"`, 0o600),
			want: func(c *Config) {
				c.Transcribe.BaseURL, c.Transcribe.APIKey = "https://api.openai.com/v1", testTranscribeKey
			}},
		{name: "key file", config: file(`base_url = "https://api.groq.com/openai/v1"`+"\n"+`api_key_file = "keys/groq"`, 0o600),
			files: []cfgFile{{name: "keys/groq", content: testTranscribeKey + "\n", mode: 0o600}},
			want: func(c *Config) {
				c.Transcribe.BaseURL, c.Transcribe.APIKey = "https://api.groq.com/openai/v1", testTranscribeKey
				c.Transcribe.APIKeyFile = "$HOME/keys/groq"
			}},
		{name: "key in a config others can read", config: file(`base_url = "https://api.openai.com/v1"`+"\n"+`api_key = "`+testTranscribeKey+`"`, 0o644),
			wantErr: []string{"holds transcribe.api_key and is open to other users"}, notErr: []string{testTranscribeKey}},
		{name: "key file others can read", config: file(`base_url = "https://x.example/v1"`+"\n"+`api_key_file = "keys/groq"`, 0o600),
			files:   []cfgFile{{name: "keys/groq", content: testTranscribeKey, mode: 0o644}},
			wantErr: []string{"transcribe.api_key_file"}, notErr: []string{testTranscribeKey}},
		{name: "key file in the workspace", config: file(`base_url = "https://x.example/v1"`+"\n"+`api_key_file = "workspace/k"`, 0o600),
			files:   []cfgFile{{name: "workspace/k", content: testTranscribeKey, mode: 0o600}},
			wantErr: []string{"transcribe.api_key_file: $HOME/workspace/k is inside agent.workspace"}},
		{name: "key without an endpoint", config: file(`api_key = "`+testTranscribeKey+`"`, 0o600),
			wantErr: []string{"transcribe.base_url: is required with an API key"}, notErr: []string{testTranscribeKey}},
		{name: "both key and file", config: file(`base_url = "https://x.example/v1"`+"\n"+`api_key = "a"`+"\n"+`api_key_file = "k"`, 0o600),
			wantErr: []string{"api_key and api_key_file are both set"}},
		{name: "size out of range", config: file(`base_url = "https://x.example/v1"`+"\n"+`max_mb = 0`, 0o600),
			wantErr: []string{"transcribe.max_mb: must be between 1 and 100"}},
	})
}

func TestTranscribeKeyNeverPrinted(t *testing.T) {
	c := TranscribeConfig{BaseURL: "https://x.example/v1", APIKey: testTranscribeKey}
	for _, s := range []string{c.String(), c.GoString(), c.LogValue().String()} {
		if strings.Contains(s, testTranscribeKey) {
			t.Errorf("%q shows the key", s)
		}
	}
}
