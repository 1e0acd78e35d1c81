package objectstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// ProviderAWS is the S3 provider, under the names Velero's AWS plugin
// answers to.
const ProviderAWS = "aws"

// isS3 reports whether a location's provider is S3.
func isS3(provider string) bool {
	return provider == ProviderAWS || provider == "velero.io/aws" || provider == "s3"
}

// S3 location config keys (spec.config), as velero-plugin-for-aws reads them.
const (
	S3ConfigRegion          = "region"
	S3ConfigURL             = "s3Url"
	S3ConfigForcePathStyle  = "s3ForcePathStyle"
	S3ConfigInsecureSkipTLS = "insecureSkipTLSVerify"
	S3ConfigProfile         = "profile"
	S3ConfigCredentialsFile = "credentialsFile"
)

// S3Options configure an S3 store.
type S3Options struct {
	Bucket string
	// Endpoint is the server URL (s3Url); empty: AWS in Region.
	Endpoint              string
	Region                string
	ForcePathStyle        bool
	InsecureSkipTLSVerify bool
	// CACert is a PEM bundle trusted besides the system's.
	CACert []byte
	// Credentials is an AWS shared credentials file's content (INI) and
	// the profile to take from it; empty: the environment's
	// (AWS_ACCESS_KEY_ID, ...).
	Credentials []byte
	Profile     string
	// Guard, when set, is a tenant's location's: every connection goes
	// through it (no proxy from the environment), and credentials must
	// be given (never the server's environment's).
	Guard *EndpointGuard
}

// S3 is a Store in an S3 bucket; keys are object names.
type S3 struct {
	client *minio.Client
	bucket string
	// http makes the requests the client has no call for, through the
	// client's transport (a tenant's guard included).
	http *http.Client
}

var _ Store = &S3{}

// NewS3 returns the store of opts.
func NewS3(opts S3Options) (*S3, error) {
	if opts.Bucket == "" {
		return nil, errors.New("s3: a bucket is required")
	}
	region := opts.Region
	if region == "" {
		region = "us-east-1"
	}
	host, insecure, err := opts.HostPort()
	if err != nil {
		return nil, err
	}
	secure := !insecure
	if opts.Guard != nil && len(opts.Credentials) == 0 {
		return nil, errors.New("s3: a tenant's storage location needs credentials (spec.credential): it never uses the server's own")
	}
	creds, err := s3Credentials(opts.Credentials, opts.Profile)
	if err != nil {
		return nil, err
	}
	transport, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	if opts.Guard != nil {
		hostname := host
		if h, _, err := net.SplitHostPort(host); err == nil {
			hostname = h
		}
		transport.Proxy = nil
		transport.DialContext = opts.Guard.DialContext(hostname)
	}
	if secure && (opts.InsecureSkipTLSVerify || len(opts.CACert) > 0) {
		tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: opts.InsecureSkipTLSVerify} //nolint:gosec // the location asks for it
		if len(opts.CACert) > 0 {
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(opts.CACert) {
				return nil, errors.New("s3: the CA certificate bundle holds no PEM certificate")
			}
			tlsConfig.RootCAs = pool
		}
		transport.TLSClientConfig = tlsConfig
	}
	lookup := minio.BucketLookupAuto
	if opts.ForcePathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(host, &minio.Options{Creds: creds, Secure: secure, Region: region, BucketLookup: lookup,
		Transport: http.RoundTripper(transport)})
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	return &S3{client: client, bucket: opts.Bucket, http: &http.Client{Transport: transport}}, nil
}

// S3Keys are the keys a client signs its S3 requests with.
type S3Keys struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// Keys returns the location's keys: its credentials file's profile, or
// the environment's (AWS_ACCESS_KEY_ID, ...) when it has none.
func (o S3Options) Keys() (S3Keys, error) {
	creds, err := s3Credentials(o.Credentials, o.Profile)
	if err != nil {
		return S3Keys{}, err
	}
	v, err := creds.Get()
	if err != nil {
		return S3Keys{}, fmt.Errorf("s3 credentials: %w", err)
	}
	return S3Keys{AccessKeyID: v.AccessKeyID, SecretAccessKey: v.SecretAccessKey, SessionToken: v.SessionToken}, nil
}

// HostPort is the endpoint's host:port (AWS's in the region without an
// endpoint) and whether TLS is off (an http URL).
func (o S3Options) HostPort() (hostPort string, insecure bool, err error) {
	if o.Endpoint == "" {
		region := o.Region
		if region == "" {
			region = "us-east-1"
		}
		return "s3." + region + ".amazonaws.com", false, nil
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false, fmt.Errorf("s3: %s %q is not an http(s) URL", S3ConfigURL, o.Endpoint)
	}
	return u.Host, u.Scheme == "http", nil
}

// s3Credentials reads a profile of an AWS shared credentials file, or
// falls back to the environment.
func s3Credentials(file []byte, profile string) (*credentials.Credentials, error) {
	if len(file) == 0 {
		return credentials.NewEnvAWS(), nil
	}
	if profile == "" {
		profile = "default"
	}
	values, err := parseAWSCredentials(file, profile)
	if err != nil {
		return nil, err
	}
	return credentials.NewStaticV4(values["aws_access_key_id"], values["aws_secret_access_key"], values["aws_session_token"]), nil
}

// parseAWSCredentials returns the keys of one profile of an AWS shared
// credentials file.
func parseAWSCredentials(file []byte, profile string) (map[string]string, error) {
	values := map[string]string{}
	section, found := "", false
	sc := bufio.NewScanner(bytes.NewReader(file))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.TrimSpace(strings.TrimPrefix(strings.TrimSuffix(line, "]"), "["))
			section = strings.TrimPrefix(section, "profile ")
			found = found || section == profile
		case section == profile:
			k, v, ok := strings.Cut(line, "=")
			if ok {
				values[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("s3 credentials: no profile %q", profile)
	}
	if values["aws_access_key_id"] == "" || values["aws_secret_access_key"] == "" {
		return nil, fmt.Errorf("s3 credentials: profile %q lacks aws_access_key_id or aws_secret_access_key", profile)
	}
	return values, nil
}

func isNoSuchKey(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == "NoSuchKey" || code == "NotFound"
}

// Get opens an object.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.getVersion(ctx, key, "")
}

// getVersion opens a version of an object ("": its current one).
func (s *S3) getVersion(ctx context.Context, key, versionID string) (io.ReadCloser, error) {
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{VersionID: versionID})
	if err != nil {
		return nil, fmt.Errorf("s3: getting %s: %w", key, err)
	}
	// GetObject is lazy: Stat makes the request, so a missing object is
	// reported here rather than at the first read.
	if _, err := obj.Stat(); err != nil {
		_ = obj.Close()
		if isNoSuchKey(err) {
			return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
		}
		return nil, fmt.Errorf("s3: getting %s: %w", key, err)
	}
	return obj, nil
}

// Put uploads an object: one of at most SmallObject bytes in one request,
// a larger one in parts (multipart upload of PartSize parts: the object
// appears whole when the upload completes, and an upload that fails is
// aborted).
func (s *S3) Put(ctx context.Context, key string, r io.Reader) error {
	_, err := s.put(ctx, key, r)
	return err
}

// Sizes of uploads: most objects a backup writes (its logs, lists and
// manifests, and the tarball of a few thousand items) are small, and a
// multipart upload holds a buffer of a whole part.
const (
	// SmallObject is the largest object sent in one request, read into
	// memory first.
	SmallObject = 4 << 20
	// PartSize is a multipart upload's part: S3 allows 10,000 parts, so
	// an object of up to 156 GiB.
	PartSize = 16 << 20
)

// put uploads an object and returns its version (in a versioned bucket).
func (s *S3) put(ctx context.Context, key string, r io.Reader) (string, error) {
	var head bytes.Buffer
	n, err := head.ReadFrom(io.LimitReader(r, SmallObject+1))
	if err != nil {
		return "", fmt.Errorf("s3: putting %s: reading it: %w", key, err)
	}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream"}
	var info minio.UploadInfo
	if n <= SmallObject {
		info, err = s.client.PutObject(ctx, s.bucket, key, bytes.NewReader(head.Bytes()), n, opts)
	} else {
		opts.PartSize = PartSize
		info, err = s.client.PutObject(ctx, s.bucket, key, io.MultiReader(&head, r), -1, opts)
	}
	if err != nil {
		return "", fmt.Errorf("s3: putting %s: %w", key, err)
	}
	return info.VersionID, nil
}

// Delete removes an object.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil && !isNoSuchKey(err) {
		return fmt.Errorf("s3: deleting %s: %w", key, err)
	}
	return nil
}

// List returns the keys under prefix.
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	if err := s.Walk(ctx, prefix, func(key string) error { keys = append(keys, key); return nil }); err != nil {
		return nil, err
	}
	sort.Strings(keys)
	return keys, nil
}

// Walk calls fn with the keys under prefix as the bucket lists them, page
// by page (S3 lists at most 1,000 keys a request).
func (s *S3) Walk(ctx context.Context, prefix string, fn func(key string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a walk ended early stops the listing
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return fmt.Errorf("s3: listing %s: %w", prefix, obj.Err)
		}
		if err := fn(obj.Key); err != nil {
			return err
		}
	}
	return nil
}

// Probe checks that the bucket exists and can be listed (no write: a
// read-only location must probe fine).
func (s *S3) Probe(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("s3: bucket %s: %w", s.bucket, err)
	}
	if !ok {
		return fmt.Errorf("s3: bucket %s does not exist", s.bucket)
	}
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{MaxKeys: 1}) {
		if obj.Err != nil {
			return fmt.Errorf("s3: listing bucket %s: %w", s.bucket, obj.Err)
		}
		break
	}
	return nil
}

// s3OptionsOf reads a location's S3 settings; secret is the content of
// spec.credential's key when there is one.
func s3OptionsOf(bucket string, config map[string]string, caCert, secret []byte) (S3Options, error) {
	opts := S3Options{Bucket: bucket, Endpoint: config[S3ConfigURL], Region: config[S3ConfigRegion],
		Profile: config[S3ConfigProfile], CACert: caCert, Credentials: secret}
	for key, dst := range map[string]*bool{S3ConfigForcePathStyle: &opts.ForcePathStyle, S3ConfigInsecureSkipTLS: &opts.InsecureSkipTLSVerify} {
		if v, ok := config[key]; ok && v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return S3Options{}, fmt.Errorf("config %s: %q is not a boolean", key, v)
			}
			*dst = b
		}
	}
	if path := config[S3ConfigCredentialsFile]; path != "" && len(secret) == 0 {
		data, err := os.ReadFile(path)
		if err != nil {
			return S3Options{}, fmt.Errorf("config %s: %w", S3ConfigCredentialsFile, err)
		}
		opts.Credentials = data
	}
	return opts, nil
}
