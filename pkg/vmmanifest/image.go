package vmmanifest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// CheckImage checks a backup's file before anything reads it: the volume
// that holds it is its namespace's to write, so it must be a regular file
// (a symlink could lead to any of the host's files, a device hang a read),
// a qcow2 image whose data is its own (a qcow2 header may name an
// external data file, any of the host's, which QEMU would read into the
// restored disk).
func CheckImage(ctx context.Context, file string) error {
	st, err := os.Lstat(file)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s): it is not read", file, st.Mode().Type())
	}
	out, err := exec.CommandContext(ctx, "qemu-img", "info", "-U", "-f", "qcow2", "--output=json", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: qemu-img info: %v: %s", file, err, strings.TrimSpace(string(out)))
	}
	var info struct {
		FormatSpecific struct {
			Data struct {
				DataFile string `json:"data-file"`
			} `json:"data"`
		} `json:"format-specific"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return fmt.Errorf("%s: qemu-img info: %w", file, err)
	}
	if f := info.FormatSpecific.Data.DataFile; f != "" {
		return fmt.Errorf("%s names an external data file (%s): a backup's image holds its own data, it is not read", file, f)
	}
	return nil
}
