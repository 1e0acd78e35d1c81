// Command build-console bundles the web console (web/console) into
// pkg/console/dist with esbuild's Go API: src/main.jsx and what it imports
// (Preact and its signals from web/console/node_modules, installed by
// npm ci from the committed package-lock.json) into one minified app.js,
// src/app.css into app.css, and src/index.html copied. The output depends
// on the sources and the locked packages only, so that a fresh build can be
// compared with the committed bundle (hack/verify-console.sh).
//
// Usage: build-console <web/console> <output dir>
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: build-console <web/console> <output dir>")
		os.Exit(2)
	}
	if err := build(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "build-console:", err)
		os.Exit(1)
	}
}

func build(src, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	result := api.Build(api.BuildOptions{
		EntryPoints:       []string{"src/main.jsx", "src/app.css"},
		EntryNames:        "[name]",
		Outdir:            mustAbs(out),
		AbsWorkingDir:     mustAbs(src),
		Bundle:            true,
		MinifyWhitespace:  true,
		MinifyIdentifiers: true,
		MinifySyntax:      true,
		Format:            api.FormatESModule,
		Target:            api.ES2022,
		JSX:               api.JSXAutomatic,
		JSXImportSource:   "preact",
		LegalComments:     api.LegalCommentsEndOfFile,
		Charset:           api.CharsetUTF8,
		Write:             false,
		LogLevel:          api.LogLevelWarning,
	})
	if len(result.Errors) > 0 {
		var msgs []string
		for _, m := range result.Errors {
			where := ""
			if m.Location != nil {
				where = fmt.Sprintf("%s:%d: ", m.Location.File, m.Location.Line)
			}
			msgs = append(msgs, where+m.Text)
		}
		return fmt.Errorf("%s", strings.Join(msgs, "\n"))
	}
	for _, f := range result.OutputFiles {
		name := filepath.Base(f.Path)
		if name == "main.js" {
			name = "app.js"
		}
		if err := os.WriteFile(filepath.Join(out, name), f.Contents, 0o644); err != nil {
			return err
		}
	}
	page, err := os.ReadFile(filepath.Join(src, "src", "index.html"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "index.html"), page, 0o644)
}

func mustAbs(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return abs
}
