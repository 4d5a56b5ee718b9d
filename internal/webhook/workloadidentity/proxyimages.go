package workloadidentity

import (
	"errors"
	"fmt"
	"strings"
)

// The variables the upstream webhook reads its proxy images from; the manager reads the same.
const (
	ProxyImageEnv     = "PROXY_IMAGE"
	ProxyInitImageEnv = "PROXY_INIT_IMAGE"
)

// ErrProxyImages reports proxy images that cannot work: one without the other, or not an image
// reference.
var ErrProxyImages = errors.New("invalid proxy sidecar images")

// SetProxyImages sets c's proxy images from PROXY_IMAGE and PROXY_INIT_IMAGE (getenv), then
// from the flags given: a non-nil image or initImage wins over its variable, even when empty.
// The two go together (the init container sends the pod's IMDS traffic to the sidecar), so one
// without the other is an error naming both flags and variables.
func (c *Config) SetProxyImages(getenv func(string) string, image, initImage *string) error {
	img, ini := strings.TrimSpace(getenv(ProxyImageEnv)), strings.TrimSpace(getenv(ProxyInitImageEnv))
	if image != nil {
		img = strings.TrimSpace(*image)
	}
	if initImage != nil {
		ini = strings.TrimSpace(*initImage)
	}
	for _, v := range []struct{ flag, env, value string }{
		{"--proxy-image", ProxyImageEnv, img}, {"--proxy-init-image", ProxyInitImageEnv, ini},
	} {
		if strings.ContainsAny(v.value, " \t\r\n") {
			return fmt.Errorf("%w: %s (%s) %q is not an image reference", ErrProxyImages, v.flag, v.env, v.value)
		}
	}
	if (img == "") != (ini == "") {
		return fmt.Errorf("%w: set both --proxy-image (%s) and --proxy-init-image (%s), or neither; got %q and %q",
			ErrProxyImages, ProxyImageEnv, ProxyInitImageEnv, img, ini)
	}
	c.ProxyImage, c.ProxyInitImage = img, ini
	return nil
}
