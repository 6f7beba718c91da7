module github.com/latchd/latch

go 1.26.0

require (
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/go-telegram-bot-api/telegram-bot-api/v5 v5.5.1 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/skip2/go-qrcode v0.0.0-20200617195104-da1b6568686e // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	golang.org/x/time v0.16.0 // indirect
)
