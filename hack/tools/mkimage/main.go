// Command mkimage packs a directory tree as a one-layer linux/amd64 image
// and writes it as a docker-archive tarball, what `ctr images import`
// reads: the harness's nodes import their images so (no registry is
// reachable from them). The layer is reproducible: entries in name order,
// owned by root, without times.
//
//	mkimage -root DIR -tag localhost/busybox:harness -out busybox.tar [-entrypoint /pause] [-cmd sh] [-user 65532]
package main

import (
	"archive/tar"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	root := flag.String("root", "", "the directory tree of the image's one layer")
	tag := flag.String("tag", "", "the image's reference, such as localhost/busybox:harness")
	out := flag.String("out", "", "the docker-archive tarball to write")
	entrypoint := flag.String("entrypoint", "", "the entrypoint (words separated by spaces)")
	cmd := flag.String("cmd", "", "the command (words separated by spaces)")
	user := flag.String("user", "", "the user the image runs as")
	flag.Parse()
	if *root == "" || *tag == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "mkimage: -root, -tag and -out are required")
		os.Exit(2)
	}
	if err := run(*root, *tag, *out, *entrypoint, *cmd, *user); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

func run(root, tag, out, entrypoint, cmd, user string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("the tag %q: %w", tag, err)
	}
	// The layer goes through a file beside out, not memory: the server's
	// binary alone is about 170 MiB.
	layerFile := out + ".layer"
	defer os.Remove(layerFile)
	if err := layerTar(root, layerFile); err != nil {
		return fmt.Errorf("packing %s: %w", root, err)
	}
	layer, err := tarball.LayerFromFile(layerFile)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, User: user,
		Entrypoint: strings.Fields(entrypoint), Cmd: strings.Fields(cmd)}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}

// layerTar writes the tree under root as a tar file at out (WalkDir goes
// in name order), symbolic links kept as links.
func layerTar(root, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "root", "root"
		h.ModTime, h.AccessTime, h.ChangeTime = time.Unix(0, 0), time.Time{}, time.Time{}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
