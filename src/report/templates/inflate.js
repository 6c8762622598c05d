// hcbench report.html: timelines travel gzip-compressed and base64-encoded (src/report/bundle.rs).
// hcbenchInflate turns one bundle back into its JSON value with the browser's own
// DecompressionStream; it rejects, with the reason, where the browser has none.
function hcbenchInflate(base64) {
  if (typeof DecompressionStream === "undefined") {
    return Promise.reject(new Error("this browser cannot inflate gzip (no DecompressionStream)"));
  }
  try {
    var text = atob(base64);
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  } catch (e) {
    return Promise.reject(e);
  }
}
