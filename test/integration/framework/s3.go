package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Server is a real S3 server (versitygw, posix backend) on loopback,
// serving the directories under Root as buckets.
type S3Server struct {
	Endpoint  string
	AccessKey string
	SecretKey string
	Root      string
	cmd       *exec.Cmd
	exited    chan struct{}
	waitErr   error
	stopOnce  sync.Once
}

// Stop stops the server now (it is stopped when the test ends anyway).
func (s *S3Server) Stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
}

// CredentialsFile writes an AWS shared credentials file for the server's
// key under profile and returns its path.
func (s *S3Server) CredentialsFile(t testing.TB, profile string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "credentials")
	body := fmt.Sprintf("[%s]\naws_access_key_id = %s\naws_secret_access_key = %s\n", profile, s.AccessKey, s.SecretKey)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// MakeBucket creates a bucket (a directory of the posix backend).
func (s *S3Server) MakeBucket(t testing.TB, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(s.Root, name), 0o755); err != nil {
		t.Fatal(err)
	}
}

// RemoveBucket takes a bucket away from the server at once, as if it had
// been deleted, even while objects are being written into it: its
// directory is moved out of Root in one rename (removing it file by file
// races with the writes), and removed with the test's directories.
func (s *S3Server) RemoveBucket(t testing.TB, name string) {
	t.Helper()
	if err := os.Rename(filepath.Join(s.Root, name), filepath.Join(t.TempDir(), name)); err != nil {
		t.Fatalf("removing bucket %s: %v", name, err)
	}
}

// StartS3 starts an S3 server and stops it when the test ends.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	return startS3(t)
}

// StartVersionedS3 starts an S3 server whose buckets can be versioned and
// made with object lock (MakeLockedBucket), and stops it when the test
// ends.
func StartVersionedS3(t testing.TB) *S3Server {
	t.Helper()
	return startS3(t, "--versioning-dir", t.TempDir())
}

// MakeLockedBucket creates a bucket with object lock (and so versioning)
// through the S3 API, as a bucket's owner does.
func (s *S3Server) MakeLockedBucket(t testing.TB, name string) {
	t.Helper()
	if err := s.Client(t).MakeBucket(context.Background(), name, minio.MakeBucketOptions{ObjectLocking: true}); err != nil {
		t.Fatalf("making bucket %s with object lock: %v", name, err)
	}
}

// Client is an S3 client of the server holding its credentials: what
// anyone who took them can do.
func (s *S3Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatalf("S3 client: %v", err)
	}
	return c
}

func startS3(t testing.TB, posixFlags ...string) *S3Server {
	t.Helper()
	if testing.Short() {
		t.Skip("needs versitygw, a real S3 server that make tools builds: not in the fast tier (make test-unit); make test runs it")
	}
	bin := Binary(t, "versitygw")
	root := t.TempDir()
	sidecar := t.TempDir()
	port := freePort(t)
	s := &S3Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), AccessKey: "backstop-test", SecretKey: "backstop-test-secret", Root: root}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	// Object metadata in a sidecar directory: the test directory's file
	// system need not support extended attributes.
	args := append([]string{"--access", s.AccessKey, "--secret", s.SecretKey, "--port", "127.0.0.1:" + strconv.Itoa(port),
		"posix", "--sidecar", sidecar}, posixFlags...)
	s.cmd = diesWithTest(exec.Command(bin, append(args, root)...))
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting versitygw: %v", err)
	}
	s.exited = make(chan struct{})
	go func() { s.waitErr = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("versitygw log:\n%s", b)
			}
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			conn.Close()
			return s
		}
		select {
		case <-s.exited:
			b, _ := os.ReadFile(logFile.Name())
			t.Fatalf("versitygw exited at start: %v\n%s", s.waitErr, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen on port %d within 30s", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
