// Command oci-image assembles a single-layer OCI image into an OCI image layout folder, and pushes
// such a folder to a registry. It is what scripts/image runs; it uses go-containerregistry, the
// library behind crane and ko, so no container engine is involved.
//
//	oci-image build --out DIR --tag TAG --platform linux/amd64 [--epoch N]
//	    --file DST:MODE=SRC ...  --dir DST:MODE:UID:GID ...
//	    --user UID:GID --entrypoint ARG ... --cmd ARG ... --env K=V ... --label K=V ...
//	oci-image push [--insecure] DIR REF      (prints REF@sha256:...)
//	oci-image digest DIR                     (prints the image manifest's digest)
//
// Reproducible by construction: tar entries are sorted by path, owned by numeric ids with no
// user/group names, and carry the --epoch mtime (SOURCE_DATE_EPOCH, default 0); gzip has no name
// or time; the config's only times are --epoch too. The same inputs give the same digest.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const usage = `usage:
  oci-image build --out DIR --tag TAG --platform OS/ARCH [--epoch N]
      --file DST:MODE=SRC ... --dir DST:MODE:UID:GID ...
      --user UID:GID --entrypoint ARG ... [--cmd ARG ...] [--env K=V ...] [--label K=V ...]
  oci-image push [--insecure] DIR REF
  oci-image digest DIR`

// entry is one tar entry of the layer.
type entry struct {
	path     string // absolute, clean, no trailing slash
	dir      bool
	mode     int64
	uid, gid int
	src      string // file contents come from here
}

type buildArgs struct {
	out, tag, platform, user string
	epoch                    int64
	entries                  map[string]entry
	entrypoint, cmd, env     []string
	labels                   map[string]string
}

func main() {
	if len(os.Args) < 2 {
		fail(errors.New(usage))
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "push":
		err = push(os.Args[2:])
	case "digest":
		err = digest(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Println(usage)
	default:
		err = fmt.Errorf("unknown command %q\n%s", os.Args[1], usage)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "oci-image: %v\n", err)
	os.Exit(1)
}

func parseBuild(args []string) (*buildArgs, error) {
	b := &buildArgs{entries: map[string]entry{}, labels: map[string]string{}}
	for i := 0; i < len(args); i++ {
		flag := args[i]
		if i+1 >= len(args) {
			return nil, fmt.Errorf("%s needs a value", flag)
		}
		i++
		v := args[i]
		switch flag {
		case "--out":
			b.out = v
		case "--tag":
			b.tag = v
		case "--platform":
			b.platform = v
		case "--user":
			b.user = v
		case "--epoch":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("--epoch %q: want seconds since 1970", v)
			}
			b.epoch = n
		case "--file":
			spec, src, ok := strings.Cut(v, "=")
			dst, mode, ok2 := strings.Cut(spec, ":")
			if !ok || !ok2 || src == "" {
				return nil, fmt.Errorf("--file %q: want DST:MODE=SRC", v)
			}
			e, err := newEntry(dst, mode, "0", "0", false)
			if err != nil {
				return nil, fmt.Errorf("--file %q: %w", v, err)
			}
			e.src = src
			if err := b.add(e); err != nil {
				return nil, err
			}
		case "--dir":
			parts := strings.Split(v, ":")
			if len(parts) != 4 {
				return nil, fmt.Errorf("--dir %q: want DST:MODE:UID:GID", v)
			}
			e, err := newEntry(parts[0], parts[1], parts[2], parts[3], true)
			if err != nil {
				return nil, fmt.Errorf("--dir %q: %w", v, err)
			}
			if err := b.add(e); err != nil {
				return nil, err
			}
		case "--entrypoint":
			b.entrypoint = append(b.entrypoint, v)
		case "--cmd":
			b.cmd = append(b.cmd, v)
		case "--env":
			if !strings.Contains(v, "=") {
				return nil, fmt.Errorf("--env %q: want K=V", v)
			}
			b.env = append(b.env, v)
		case "--label":
			k, val, ok := strings.Cut(v, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("--label %q: want K=V", v)
			}
			b.labels[k] = val
		default:
			return nil, fmt.Errorf("unknown option %q\n%s", flag, usage)
		}
	}
	switch {
	case b.out == "" || b.tag == "" || b.platform == "" || b.user == "":
		return nil, errors.New("--out, --tag, --platform and --user are required")
	case len(b.entrypoint) == 0:
		return nil, errors.New("--entrypoint is required")
	case len(b.entries) == 0:
		return nil, errors.New("the layer would be empty: give --file or --dir")
	}
	return b, nil
}

func newEntry(dst, mode, uid, gid string, dir bool) (entry, error) {
	if !path.IsAbs(dst) || path.Clean(dst) != dst || dst == "/" {
		return entry{}, fmt.Errorf("destination %q must be a clean absolute path", dst)
	}
	m, err := strconv.ParseInt(mode, 8, 64)
	if err != nil || m < 0 || m > 0o7777 {
		return entry{}, fmt.Errorf("mode %q: want octal, e.g. 0755", mode)
	}
	u, err1 := strconv.Atoi(uid)
	g, err2 := strconv.Atoi(gid)
	if err1 != nil || err2 != nil || u < 0 || g < 0 {
		return entry{}, fmt.Errorf("uid/gid %q:%q: want numbers", uid, gid)
	}
	return entry{path: dst, dir: dir, mode: m, uid: u, gid: g}, nil
}

func (b *buildArgs) add(e entry) error {
	if _, dup := b.entries[e.path]; dup {
		return fmt.Errorf("%s is given twice", e.path)
	}
	b.entries[e.path] = e
	return nil
}

// layerTar writes the entries, their missing parent folders (0755, root) first, sorted by path.
func layerTar(b *buildArgs) ([]byte, error) {
	all := map[string]entry{}
	for p, e := range b.entries {
		all[p] = e
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if parent, ok := b.entries[d]; ok && !parent.dir {
				return nil, fmt.Errorf("%s is a file but %s is inside it", d, p)
			}
			if _, ok := all[d]; !ok {
				all[d] = entry{path: d, dir: true, mode: 0o755}
			}
		}
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	mtime := time.Unix(b.epoch, 0).UTC()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := all[p]
		h := &tar.Header{
			Name: strings.TrimPrefix(p, "/"), Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: mtime, Format: tar.FormatUSTAR,
		}
		var data []byte
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			var err error
			if data, err = os.ReadFile(e.src); err != nil {
				return nil, err
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func build(args []string) error {
	b, err := parseBuild(args)
	if err != nil {
		return err
	}
	platform, err := v1.ParsePlatform(b.platform)
	if err != nil {
		return err
	}
	raw, err := layerTar(b)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression))
	if err != nil {
		return err
	}
	created := v1.Time{Time: time.Unix(b.epoch, 0).UTC()}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: created, CreatedBy: "scripts/image", Comment: "one layer: see scripts/image"}})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Created, cf.OS, cf.Architecture, cf.Variant = created, platform.OS, platform.Architecture, platform.Variant
	cf.Config.User, cf.Config.Entrypoint, cf.Config.Cmd = b.user, b.entrypoint, b.cmd
	cf.Config.Env, cf.Config.Labels, cf.Config.WorkingDir = b.env, b.labels, "/"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if err := os.RemoveAll(b.out); err != nil {
		return err
	}
	p, err := layout.Write(b.out, empty.Index)
	if err != nil {
		return err
	}
	ann := map[string]string{"org.opencontainers.image.ref.name": b.tag}
	if err := p.AppendImage(img, layout.WithAnnotations(ann), layout.WithPlatform(*platform)); err != nil {
		return err
	}
	return printSummary(img)
}

func printSummary(img v1.Image) error {
	d, err := img.Digest()
	if err != nil {
		return err
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	size := m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	size += int64(len(raw))
	out, err := json.Marshal(map[string]any{"digest": d.String(), "size": size})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

// single reads the one image of a layout folder.
func single(dir string) (v1.Image, error) {
	ii, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI image layout: %w", dir, err)
	}
	m, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d manifests, want 1", dir, len(m.Manifests))
	}
	return ii.Image(m.Manifests[0].Digest)
}

func digest(args []string) error {
	if len(args) != 1 {
		return errors.New(usage)
	}
	img, err := single(args[0])
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Println(d.String())
	return nil
}

func push(args []string) error {
	var opts []name.Option
	if len(args) > 0 && args[0] == "--insecure" {
		opts, args = append(opts, name.Insecure), args[1:]
	}
	if len(args) != 2 {
		return errors.New(usage)
	}
	img, err := single(args[0])
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(args[1], opts...)
	if err != nil {
		return err
	}
	// Credentials as docker and crane find them ($DOCKER_CONFIG/config.json, credential helpers).
	if err := remote.Write(ref, img, remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("kwop-scripts-image")); err != nil {
		return fmt.Errorf("pushing to %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Println(ref.Context().Digest(d.String()).String())
	return nil
}
