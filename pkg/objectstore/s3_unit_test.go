package objectstore

import (
	"strings"
	"testing"
)

func TestParseAWSCredentials(t *testing.T) {
	file := []byte(`
# comment
[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key=secretdefault

[profile backups]
aws_access_key_id = AKIDBACKUPS
aws_secret_access_key = secretbackups
aws_session_token = token

[broken]
aws_access_key_id = only-the-id
`)
	for _, c := range []struct {
		profile, id, secret, token, err string
	}{
		{profile: "default", id: "AKIDDEFAULT", secret: "secretdefault"},
		{profile: "backups", id: "AKIDBACKUPS", secret: "secretbackups", token: "token"},
		{profile: "missing", err: `no profile "missing"`},
		{profile: "broken", err: "lacks aws_access_key_id or aws_secret_access_key"},
	} {
		v, err := parseAWSCredentials(file, c.profile)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("profile %s: error %v, want %q", c.profile, err, c.err)
			}
			continue
		}
		if err != nil || v["aws_access_key_id"] != c.id || v["aws_secret_access_key"] != c.secret || v["aws_session_token"] != c.token {
			t.Errorf("profile %s: %v %v", c.profile, v, err)
		}
	}
}

func TestS3OptionsOf(t *testing.T) {
	opts, err := s3OptionsOf("bucket", map[string]string{
		S3ConfigURL: "http://127.0.0.1:9000", S3ConfigRegion: "eu-west-1", S3ConfigForcePathStyle: "true", S3ConfigProfile: "p",
	}, nil, []byte("[p]\n"))
	if err != nil || opts.Endpoint != "http://127.0.0.1:9000" || opts.Region != "eu-west-1" || !opts.ForcePathStyle ||
		opts.InsecureSkipTLSVerify || opts.Profile != "p" || string(opts.Credentials) != "[p]\n" {
		t.Errorf("options %+v, %v", opts, err)
	}
	if _, err := s3OptionsOf("b", map[string]string{S3ConfigForcePathStyle: "yes please"}, nil, nil); err == nil ||
		!strings.Contains(err.Error(), "s3ForcePathStyle") {
		t.Errorf("a non-boolean s3ForcePathStyle: %v", err)
	}
	if _, err := s3OptionsOf("b", map[string]string{S3ConfigCredentialsFile: "/nonexistent/credentials"}, nil, nil); err == nil ||
		!strings.Contains(err.Error(), "credentialsFile") {
		t.Errorf("a missing credentials file: %v", err)
	}
	if _, err := NewS3(S3Options{Bucket: "b", Endpoint: "ftp://host"}); err == nil {
		t.Error("an ftp endpoint was accepted")
	}
	if _, err := NewS3(S3Options{}); err == nil {
		t.Error("a store without a bucket was accepted")
	}
}
