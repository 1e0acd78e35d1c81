package virt

import (
	"strings"
	"testing"
)

// TestXMLDocuments: the documents given to libvirt, and those read back,
// without a daemon: names and paths are escaped, a checkpoint loses only
// its parent, sizes add up, file disks are found and rewritten in place.
func TestXMLDocuments(t *testing.T) {
	disks := []Disk{{Name: "vda"}, {Name: "vdb"}}
	push, err := pushBackupXML(disks, map[string]string{"vda": "/b/vda's.qcow2", "vdb": "/b/vdb.qcow2"}, "cp-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<incremental>cp-1</incremental>`, `<disk type="file" name="vda" backup="yes">`,
		`<driver type="qcow2"></driver>`, `<target file="/b/vda&#39;s.qcow2">`} {
		if !strings.Contains(push, want) {
			t.Errorf("push backup XML has no %s:\n%s", want, push)
		}
	}
	pull, err := pullBackupXML("/run/x.sock", disks[:1], "/b")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<domainbackup mode="pull">`, `<server transport="unix" socket="/run/x.sock">`, `<scratch file="/b/.vda.scratch">`} {
		if !strings.Contains(pull, want) {
			t.Errorf("pull backup XML has no %s:\n%s", want, pull)
		}
	}
	if cp, err := newCheckpointXML("", disks); err != nil || cp != "" {
		t.Errorf("checkpoint XML without a name: %q, %v", cp, err)
	}

	saved := `<domaincheckpoint><name>cp-2</name><parent><name>cp-1</name></parent><creationTime>1700000000</creationTime>` +
		`<disks><disk name="vda" checkpoint="bitmap" bitmap="cp-2" size="65536"/><disk name="vdb" checkpoint="bitmap" bitmap="cp-2" size="4096"/></disks></domaincheckpoint>`
	alone, err := withoutParent(saved)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(alone, "parent") || !strings.Contains(alone, "<creationTime>1700000000</creationTime>") || !strings.Contains(alone, `bitmap="cp-2"`) {
		t.Errorf("checkpoint without its parent:\n%s", alone)
	}
	if n, err := checkpointSize(saved); err != nil || n != 65536+4096 {
		t.Errorf("checkpoint size %d, %v", n, err)
	}

	dom, err := parseDomain(`<domain type="qemu"><name>d</name><devices>` +
		`<disk type="file" device="disk"><driver name="qemu" type="raw"/><source file="/img/a.raw"/><target dev="vda" bus="virtio"/></disk>` +
		`<disk type="file" device="cdrom"><driver name="qemu" type="raw"/><source file="/img/cd.iso"/><target dev="sda" bus="sata"/></disk>` +
		`</devices></domain>`)
	if err != nil {
		t.Fatal(err)
	}
	files := fileDisks(dom)
	if len(files) != 1 || diskTarget(files[0]) != "vda" || diskFormat(files[0]) != "raw" || diskFile(files[0]) != "/img/a.raw" {
		t.Fatalf("file disks: %+v", files)
	}
	if tracksChanges(dom) || usesOverlays(dom, "/state", "d") {
		t.Error("a raw disk without an overlay tracks changes")
	}
	setDiskSource(files[0], "qcow2", "/state/d/vda.qcow2")
	if !tracksChanges(dom) || !usesOverlays(dom, "/state", "d") {
		t.Error("after setting the overlay, the domain does not read through it")
	}
	out, err := dom.Marshal()
	if err != nil || !strings.Contains(out, `<source file="/state/d/vda.qcow2">`) || !strings.Contains(out, `<source file="/img/cd.iso">`) {
		t.Errorf("rewritten domain: %v\n%s", err, out)
	}

	label, err := qemuBaseLabel(`<capabilities><host><uuid>x</uuid><secmodel><model>none</model><doi>0</doi></secmodel>` +
		`<secmodel><model>dac</model><doi>0</doi><baselabel type="kvm">+1:+1</baselabel><baselabel type="qemu">+64055:+994</baselabel></secmodel></host></capabilities>`)
	if err != nil || label != "+64055:+994" {
		t.Errorf("QEMU's DAC label %q, %v", label, err)
	}
}
