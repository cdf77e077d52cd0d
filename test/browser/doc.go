// Package browser drives the tierset web console in a real, headless
// Chromium. It is its own module so chromedp stays out of the core go.mod.
package browser
