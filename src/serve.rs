//! A small static file server on 127.0.0.1 for `hcbench view`: GET and HEAD of files under a
//! few mounted folders (a run directory, `workspace/runs/`, `reports/`), nothing else.
//!
//! Why hand-written on `std::net` rather than a crate: what is needed is a few dozen lines of
//! HTTP/1.1 (one request per connection, no keep-alive, no bodies in, files out), and the
//! candidates either pull an async stack into a command that does not need one (hyper, axum)
//! or are thin and little maintained (tiny_http's last release is old). Owning it keeps the
//! security rules in sight, in one place:
//! - it listens on 127.0.0.1 only, and answers only requests whose `Host` is 127.0.0.1 or
//!   localhost at its port, so a web page elsewhere cannot read runs through DNS rebinding;
//! - a path is percent-decoded once, and any `.` or `..` segment, backslash or NUL is refused
//!   before the file system is touched; the file found is then canonicalized (symlinks
//!   resolved) and must still lie inside its mount, so a symlink cannot lead out either;
//! - responses carry `nosniff` and `no-store`; unknown extensions are served as
//!   `application/octet-stream`, never as HTML.
//!
//! Each connection is handled on its own thread with read/write timeouts, so a stalled client
//! cannot hold the others up.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Longest request head (request line and headers) read before answering 431.
const MAX_HEAD: usize = 16 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(10);
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// A folder served under a URL prefix: `/workspace/runs/` -> `<root>/workspace/runs`.
#[derive(Debug, Clone)]
pub struct Mount {
    /// Starts and ends with `/`.
    pub prefix: String,
    /// Canonical (absolute, symlinks resolved), so containment checks compare like with like.
    pub dir: PathBuf,
}

impl Mount {
    /// A mount of `dir` (which must exist) at `prefix` (`/name/`).
    pub fn new(prefix: &str, dir: &Path) -> io::Result<Mount> {
        debug_assert!(prefix.starts_with('/') && prefix.ends_with('/'));
        Ok(Mount { prefix: prefix.to_string(), dir: dir.canonicalize()? })
    }
}

/// A bound server, not yet answering.
pub struct Server {
    listener: TcpListener,
    site: Arc<Site>,
}

struct Site {
    mounts: Vec<Mount>,
    /// Where `/` redirects.
    home: String,
    port: u16,
}

impl Server {
    /// Binds 127.0.0.1:`port` (0: a free port the kernel chooses).
    pub fn bind(port: u16, mounts: Vec<Mount>, home: &str) -> io::Result<Server> {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))?;
        let port = listener.local_addr()?.port();
        Ok(Server { listener, site: Arc::new(Site { mounts, home: home.to_string(), port }) })
    }

    pub fn port(&self) -> u16 {
        self.site.port
    }

    /// Answers requests until the process ends (Ctrl-C). A failed connection is logged and
    /// the server goes on.
    pub fn run(self) -> io::Result<()> {
        for stream in self.listener.incoming() {
            let stream = match stream {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    continue;
                }
            };
            let site = Arc::clone(&self.site);
            std::thread::spawn(move || {
                if let Err(e) = handle(stream, &site) {
                    tracing::debug!("connection: {e}");
                }
            });
        }
        Ok(())
    }
}

/// One response, before it is written.
struct Response {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Body,
}

enum Body {
    Text(Vec<u8>),
    File(std::fs::File, u64),
}

impl Response {
    fn text(status: u16, reason: &'static str, message: &str) -> Response {
        Response {
            status,
            reason,
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
            body: Body::Text(format!("{message}\n").into_bytes()),
        }
    }

    fn redirect(status: u16, reason: &'static str, location: String) -> Response {
        let mut r = Response::text(status, reason, &format!("see {location}"));
        r.headers.push(("Location", location));
        r
    }
}

fn handle(stream: TcpStream, site: &Site) -> io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let (response, head_only) = match read_head(&mut reader) {
        Ok(Some(head)) => {
            let head_only = head.method == "HEAD";
            (respond(&head, site), head_only)
        }
        Ok(None) => return Ok(()),
        Err(HeadError::TooLarge) => {
            (Response::text(431, "Request Header Fields Too Large", "request head too large"), false)
        }
        Err(HeadError::Malformed) => (Response::text(400, "Bad Request", "malformed request"), false),
        Err(HeadError::Io(e)) => return Err(e),
    };
    write_response(stream, response, head_only)
}

struct Head {
    method: String,
    target: String,
    host: Option<String>,
}

enum HeadError {
    TooLarge,
    Malformed,
    Io(io::Error),
}

/// Reads the request line and headers; None when the client closed without sending any.
fn read_head(reader: &mut impl BufRead) -> Result<Option<Head>, HeadError> {
    let mut lines = Vec::new();
    let mut total = 0;
    loop {
        let mut line = Vec::new();
        let n =
            reader.by_ref().take((MAX_HEAD + 1 - total) as u64).read_until(b'\n', &mut line).map_err(HeadError::Io)?;
        if n == 0 {
            if lines.is_empty() {
                return Ok(None);
            }
            return Err(HeadError::Malformed);
        }
        total += n;
        if total > MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
        if !line.ends_with(b"\n") {
            return Err(HeadError::Malformed);
        }
        let text = String::from_utf8(line).map_err(|_| HeadError::Malformed)?;
        let text = text.trim_end_matches(['\r', '\n']).to_string();
        if text.is_empty() {
            if lines.is_empty() {
                // Blank lines before the request line are allowed (RFC 9112, 2.2).
                continue;
            }
            break;
        }
        lines.push(text);
    }
    let mut parts = lines[0].split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed);
    };
    if !version.starts_with("HTTP/1.") {
        return Err(HeadError::Malformed);
    }
    let host = lines[1..].iter().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("host").then(|| value.trim().to_string())
    });
    Ok(Some(Head { method: method.to_string(), target: target.to_string(), host }))
}

fn respond(head: &Head, site: &Site) -> Response {
    if head.method != "GET" && head.method != "HEAD" {
        let mut r = Response::text(405, "Method Not Allowed", "only GET and HEAD");
        r.headers.push(("Allow", "GET, HEAD".into()));
        return r;
    }
    let port = site.port;
    let allowed = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    if !head.host.as_deref().is_some_and(|h| allowed.iter().any(|a| a.eq_ignore_ascii_case(h))) {
        return Response::text(403, "Forbidden", "this server answers only to 127.0.0.1 and localhost");
    }
    let raw = head.target.split(['?', '#']).next().unwrap_or_default();
    if !raw.starts_with('/') {
        return Response::text(400, "Bad Request", "the path must start with /");
    }
    let Some(path) = percent_decode(raw) else {
        return Response::text(400, "Bad Request", "the path is not valid percent-encoded UTF-8");
    };
    if path.contains(['\\', '\0']) || path.split('/').any(|s| s == ".." || s == ".") {
        return Response::text(403, "Forbidden", "`.` and `..` are not allowed in paths");
    }
    if path == "/" {
        return Response::redirect(302, "Found", site.home.clone());
    }
    let Some(mount) =
        site.mounts.iter().find(|m| path.starts_with(&m.prefix) || path == m.prefix.trim_end_matches('/'))
    else {
        return Response::text(404, "Not Found", &format!("nothing is served at {path}; start at {}", site.home));
    };
    if !path.starts_with(&mount.prefix) {
        return Response::redirect(301, "Moved Permanently", mount.prefix.clone());
    }
    let rel = &path[mount.prefix.len()..];
    let candidate = mount.dir.join(rel);
    let Ok(found) = candidate.canonicalize() else {
        if packed_cell(&candidate, &mount.dir) {
            if !path.ends_with('/') {
                return Response::redirect(301, "Moved Permanently", format!("{}/", percent_encode_path(&path)));
            }
            return page_of_links(&path, vec![(false, crate::trace::stored::TRACE.to_string())]);
        }
        return stored_trace(&candidate, &mount.dir)
            .unwrap_or_else(|| Response::text(404, "Not Found", &format!("no such file: {path}")));
    };
    if !found.starts_with(&mount.dir) {
        return Response::text(403, "Forbidden", "the path leads outside the served folder");
    }
    if found.is_dir() {
        if !path.ends_with('/') {
            return Response::redirect(301, "Moved Permanently", format!("{}/", percent_encode_path(&path)));
        }
        let index = found.join("index.html");
        if index.is_file() {
            return file_response(&index);
        }
        return listing(&path, &found);
    }
    file_response(&found)
}

/// A finished cell's `cells/<id>/trace.jsonl`, asked for by that name but stored compressed
/// or in the run's pack (src/trace/stored.rs): served decompressed, as the plain file would be.
/// None when no trace is stored under that name. The deepest folder of the path that exists
/// must lie inside the mount, as any served file must.
fn stored_trace(candidate: &Path, mount_dir: &Path) -> Option<Response> {
    let existing = candidate.ancestors().find(|p| p.exists())?.canonicalize().ok()?;
    if !existing.starts_with(mount_dir) || candidate.file_name()? != crate::trace::stored::TRACE {
        return None;
    }
    let mut body = Vec::new();
    match crate::trace::stored::open(candidate).and_then(|mut r| r.read_to_end(&mut body)) {
        Ok(_) => Some(Response {
            status: 200,
            reason: "OK",
            content_type: content_type(candidate),
            headers: Vec::new(),
            body: Body::Text(body),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => Some(Response::text(500, "Internal Server Error", &e.to_string())),
    }
}

/// Whether `candidate` names a cell of a run's pack (`RUN/cells/<id>`, src/trace/pack.rs): a
/// finished cell has no folder of its own, but is served as if it had one holding its trace.
/// The run's folder must lie inside the mount.
fn packed_cell(candidate: &Path, mount_dir: &Path) -> bool {
    let (Some(cell), Some(cells)) = (candidate.file_name(), candidate.parent()) else { return false };
    let Some(run) = cells.parent().filter(|_| cells.file_name() == Some("cells".as_ref())) else { return false };
    run.canonicalize().is_ok_and(|run| run.starts_with(mount_dir))
        && packed_cells(run).iter().any(|c| c.as_str() == cell)
}

/// The cells in the pack of the run directory `run` (none when it has no pack).
fn packed_cells(run: &Path) -> Vec<String> {
    crate::trace::pack::Index::read(run).ok().flatten().map(|index| index.order).unwrap_or_default()
}

fn file_response(path: &Path) -> Response {
    match std::fs::File::open(path).and_then(|f| f.metadata().map(|m| (f, m.len()))) {
        Ok((file, len)) => Response {
            status: 200,
            reason: "OK",
            content_type: content_type(path),
            headers: Vec::new(),
            body: Body::File(file, len),
        },
        Err(e) => Response::text(404, "Not Found", &format!("cannot read {}: {e}", path.display())),
    }
}

/// A folder without an index.html: its entries as links (names escaped), folders first. A run's
/// `cells/` also lists the cells of its pack as folders ([`packed_cell`]).
fn listing(url_path: &str, dir: &Path) -> Response {
    let mut entries: Vec<(bool, String)> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.flatten().map(|e| (e.path().is_dir(), e.file_name().to_string_lossy().into_owned())).collect(),
        Err(e) => return Response::text(404, "Not Found", &format!("cannot list {url_path}: {e}")),
    };
    if dir.file_name() == Some("cells".as_ref())
        && let Some(run) = dir.parent()
    {
        let on_disk: std::collections::HashSet<String> = entries.iter().map(|(_, name)| name.clone()).collect();
        entries.extend(packed_cells(run).into_iter().filter(|c| !on_disk.contains(c)).map(|c| (true, c)));
    }
    page_of_links(url_path, entries)
}

/// The page of a folder's `entries` (is a folder, name): links, names escaped, folders first.
fn page_of_links(url_path: &str, mut entries: Vec<(bool, String)>) -> Response {
    entries.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut html = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title></head><body><h1>{0}</h1><ul>",
        escape(url_path)
    );
    if url_path != "/" {
        html.push_str("<li><a href=\"../\">../</a></li>");
    }
    for (is_dir, name) in entries {
        let slash = if is_dir { "/" } else { "" };
        html.push_str(&format!(
            "<li><a href=\"{}{slash}\">{}{slash}</a></li>",
            percent_encode_path(&name),
            escape(&name)
        ));
    }
    html.push_str("</ul></body></html>\n");
    Response {
        status: 200,
        reason: "OK",
        content_type: "text/html; charset=utf-8",
        headers: Vec::new(),
        body: Body::Text(html.into_bytes()),
    }
}

fn write_response(stream: TcpStream, response: Response, head_only: bool) -> io::Result<()> {
    let len = match &response.body {
        Body::Text(b) => b.len() as u64,
        Body::File(_, len) => *len,
    };
    let mut out = io::BufWriter::new(stream);
    write!(out, "HTTP/1.1 {} {}\r\n", response.status, response.reason)?;
    write!(out, "Content-Type: {}\r\nContent-Length: {len}\r\n", response.content_type)?;
    write!(out, "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n")?;
    for (name, value) in &response.headers {
        write!(out, "{name}: {value}\r\n")?;
    }
    out.write_all(b"\r\n")?;
    if !head_only {
        match response.body {
            Body::Text(bytes) => out.write_all(&bytes)?,
            Body::File(mut file, len) => {
                // Exactly the length announced, should the file grow while being sent.
                io::copy(&mut (&mut file).take(len), &mut out)?;
            }
        }
    }
    out.flush()
}

/// Content types by extension; what is not known is a download, never sniffed as HTML.
fn content_type(path: &Path) -> &'static str {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        // Traces and logs read best as text in a browser tab.
        "jsonl" | "ndjson" | "txt" | "log" | "tsv" | "diff" | "patch" | "py" | "rs" | "toml" | "yaml" | "yml" => {
            "text/plain; charset=utf-8"
        }
        "md" => "text/markdown; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        "xml" => "application/xml",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        _ => "application/octet-stream",
    }
}

/// `%XX` decoding of a URL path; None for a bad escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Encodes a path for a URL, keeping `/` and the unreserved characters.
pub fn percent_encode_path(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(dir: &Path) -> Site {
        Site { mounts: vec![Mount::new("/runs/", dir).unwrap()], home: "/runs/".into(), port: 8000 }
    }

    fn get(site: &Site, target: &str) -> Response {
        respond(&Head { method: "GET".into(), target: target.into(), host: Some("127.0.0.1:8000".into()) }, site)
    }

    #[test]
    fn paths_stay_inside_their_mount() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("served")).unwrap();
        std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        std::fs::write(dir.path().join("served/a.json"), "{}").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), dir.path().join("served/link.txt")).unwrap();
        let site = site(&dir.path().join("served"));
        assert_eq!(get(&site, "/runs/a.json").status, 200);
        assert_eq!(get(&site, "/runs/a.json").content_type, "application/json");
        for bad in ["/runs/../secret.txt", "/runs/%2e%2e/secret.txt", "/runs/%2E%2E%2Fsecret.txt", "/runs/./a.json"] {
            assert_eq!(get(&site, bad).status, 403, "{bad}");
        }
        assert_eq!(get(&site, "/runs/link.txt").status, 403, "a symlink out of the mount");
        assert_eq!(get(&site, "/runs/nope").status, 404);
        assert_eq!(get(&site, "/elsewhere").status, 404);
        assert_eq!(get(&site, "/runs/%zz").status, 400);
        assert_eq!(get(&site, "/").status, 302);
    }

    #[test]
    fn other_hosts_and_methods_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let site = site(dir.path());
        let head = |method: &str, host: Option<&str>| Head {
            method: method.into(),
            target: "/runs/".into(),
            host: host.map(str::to_string),
        };
        assert_eq!(respond(&head("GET", Some("evil.example:8000")), &site).status, 403);
        assert_eq!(respond(&head("GET", None), &site).status, 403);
        assert_eq!(respond(&head("POST", Some("127.0.0.1:8000")), &site).status, 405);
        assert_eq!(respond(&head("GET", Some("localhost:8000")), &site).status, 200);
    }

    #[test]
    fn a_listing_escapes_names() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("<b>.txt"), "").unwrap();
        let Body::Text(body) = listing("/runs/", dir.path()).body else { panic!("a listing is text") };
        let body = String::from_utf8(body).unwrap();
        assert!(body.contains("&lt;b&gt;.txt") && body.contains("href=\"%3Cb%3E.txt\""), "{body}");
    }

    #[test]
    fn a_finished_cells_trace_is_served_decompressed_by_its_plain_name() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(run.join("cells/old")).unwrap();
        let text = b"{\"seq\":0}\n{\"seq\":1}\n".repeat(50);
        let frame = crate::trace::stored::compress_frame(&text).unwrap();
        crate::trace::pack::PackWriter::open(&run).unwrap().append("c1", &frame).unwrap();
        std::fs::write(run.join("cells/old/trace.jsonl.zst"), &frame).unwrap();
        let site = site(dir.path());
        for cell in ["c1", "old"] {
            let r = get(&site, &format!("/runs/run/cells/{cell}/trace.jsonl"));
            assert_eq!((r.status, r.content_type), (200, "text/plain; charset=utf-8"), "{cell}");
            let Body::Text(body) = r.body else { panic!("a decompressed trace is sent from memory") };
            assert_eq!(body, text, "{cell}");
        }
        assert_eq!(get(&site, "/runs/run/cells/c2/trace.jsonl").status, 404);
        // The listings show the packed cell as a folder holding its trace.
        let text = |r: Response| match r.body {
            Body::Text(b) => String::from_utf8(b).unwrap(),
            Body::File(..) => panic!("a listing is text"),
        };
        let cells = text(get(&site, "/runs/run/cells/"));
        assert!(cells.contains("href=\"c1/\"") && cells.contains("href=\"old/\""), "{cells}");
        assert_eq!(get(&site, "/runs/run/cells/c1").status, 301);
        let c1 = get(&site, "/runs/run/cells/c1/");
        assert_eq!(c1.status, 200);
        assert!(text(c1).contains("href=\"trace.jsonl\""));
        assert_eq!(get(&site, "/runs/run/cells/c2/").status, 404, "a cell the pack does not have");
    }
}
