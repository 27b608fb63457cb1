// MathJax for pymdownx.arithmatex (generic mode): \( \) inline, \[ \] display; the vendored tex-svg.js reads it.
window.MathJax = {
  tex: {inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true, processEnvironments: true},
  options: {ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex"},
  svg: {fontCache: "global"}
};
// Material's instant navigation swaps the page without reloading it: typeset the new one.
if (typeof document$ !== "undefined") {
  document$.subscribe(() => { if (window.MathJax && MathJax.typesetPromise) { MathJax.typesetPromise(); } });
}
