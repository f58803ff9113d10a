#!/usr/bin/env python3
# Usage: webdriver_screenshot.py URL OUT.png [WAIT_SECONDS]
# Loads URL in headless chromium through chromedriver (WebDriver, standard
# library only), waits for the live page to settle, saves a PNG screenshot.
import base64, json, socket, subprocess, sys, tempfile, time, urllib.request

url, out = sys.argv[1], sys.argv[2]
wait = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
driver = subprocess.Popen(["chromedriver", f"--port={port}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
base = f"http://127.0.0.1:{port}"

def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["value"]

try:
    for _ in range(200):
        try:
            call("GET", "/status")
            break
        except OSError:
            time.sleep(0.05)
    profile = tempfile.mkdtemp()
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--hide-scrollbars",
            "--window-size=1200,640", f"--user-data-dir={profile}"]
    caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args}}}}
    sid = call("POST", "/session", caps)["sessionId"]
    try:
        call("POST", f"/session/{sid}/url", {"url": url})
        time.sleep(wait)
        png = base64.b64decode(call("GET", f"/session/{sid}/screenshot"))
        with open(out, "wb") as f:
            f.write(png)
    finally:
        call("DELETE", f"/session/{sid}")
finally:
    driver.kill()
    driver.wait()
