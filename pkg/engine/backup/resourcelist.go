package backup

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// resourceList writes <backup>-resource-list.json.gz as items come: a JSON
// object from "<group/version>/<Kind>" to "<namespace>/<name>" entries,
// spooled to a scratch file. The collector backs up one resource at a
// time, so each kind's entries come together and each key is written once.
type resourceList struct {
	file    *os.File
	gz      *gzip.Writer
	current string
	first   bool
	err     error
}

func newResourceList(dir string) (*resourceList, error) {
	f, err := os.CreateTemp(dir, "resource-list-*.gz")
	if err != nil {
		return nil, fmt.Errorf("creating the resource list: %w", err)
	}
	r := &resourceList{file: f, gz: gzip.NewWriter(f), first: true}
	r.write("{")
	return r, nil
}

func (r *resourceList) write(s string) {
	if r.err == nil {
		_, r.err = io.WriteString(r.gz, s)
	}
}

func (r *resourceList) writeJSON(v string) {
	b, err := json.Marshal(v)
	if err != nil && r.err == nil {
		r.err = err
	}
	r.write(string(b))
}

// add records an item; key is "<apiVersion>/<Kind>".
func (r *resourceList) add(key, namespace, name string) {
	entry := name
	if namespace != "" {
		entry = namespace + "/" + name
	}
	if key != r.current {
		if r.current != "" {
			r.write("]")
		}
		if !r.first {
			r.write(",")
		}
		r.first = false
		r.writeJSON(key)
		r.write(":[")
		r.current = key
		r.writeJSON(entry)
		return
	}
	r.write(",")
	r.writeJSON(entry)
}

// finish closes the JSON object and the gzip stream.
func (r *resourceList) finish() (io.Reader, error) {
	if r.current != "" {
		r.write("]")
	}
	r.write("}")
	if r.err == nil {
		r.err = r.gz.Close()
	}
	if r.err != nil {
		return nil, fmt.Errorf("writing the resource list: %w", r.err)
	}
	if _, err := r.file.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return r.file, nil
}

func (r *resourceList) close() {
	_ = r.file.Close()
	_ = os.Remove(r.file.Name())
}
