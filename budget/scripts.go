package budget

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// luaFS holds the scripts: lib.lua and one file per script. Each script
// that runs is lib.lua followed by its file (compose); both are declared
// here once and read nowhere else.
//
//go:embed lua/*.lua
var luaFS embed.FS

// scripts is a budget's compiled scripts, by name.
type scripts struct {
	reserve, confirm, release, expire, sweep, remaining, rebuild *redis.Script
	// info and publish serve operators (info.go).
	info, publish *redis.Script
}

func compose(name string) string {
	lib, err := luaFS.ReadFile("lua/lib.lua")
	if err != nil {
		panic(err) // embedded at build time: cannot fail
	}
	body, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return strings.Join([]string{string(lib), string(body)}, "\n")
}

func newScripts() *scripts {
	return &scripts{
		reserve:   redis.NewScript(compose("reserve")),
		confirm:   redis.NewScript(compose("confirm")),
		release:   redis.NewScript(compose("release")),
		expire:    redis.NewScript(compose("expire")),
		sweep:     redis.NewScript(compose("sweep")),
		remaining: redis.NewScript(compose("remaining")),
		rebuild:   redis.NewScript(compose("rebuild")),
		info:      redis.NewScript(compose("info")),
		publish:   redis.NewScript(compose("publish")),
	}
}
