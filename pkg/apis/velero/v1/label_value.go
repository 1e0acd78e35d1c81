package v1

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

// BackupUIDSelector selects the objects a backup made (labelled
// BackupUIDLabel with its UID).
func BackupUIDSelector(uid types.UID) string { return BackupUIDLabel + "=" + string(uid) }

// LabelValue makes a name usable as a label value, as Velero's
// label.GetValidName does: a name over 63 characters becomes its first 57
// and 6 hex digits of the whole name's SHA-256. Velero's labels that carry
// a name (BackupNameLabel, ScheduleNameLabel, ...) hold it this way.
func LabelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:57] + hex.EncodeToString(sum[:])[:6]
}
