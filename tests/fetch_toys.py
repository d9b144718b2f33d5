"""Toy archives and a fake HTTP response shared by tests/workbook/test_data_fetch.py and test_bad_input_battery.py."""

import io
import zipfile


def zip_bytes(files: dict[str, bytes]) -> bytes:
    """A zip archive (deflated: a large run of zeros stays small, as a zip bomb needs) holding ``files``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


class FakeResponse(io.BytesIO):
    """What urllib.request.urlopen returns, as far as data_fetch reads it."""

    def __init__(self, data):
        super().__init__(data)
        self.headers = {"Content-Length": str(len(data))}


def serve(monkeypatch, fetch_module, data: bytes) -> None:
    """Make every download of ``fetch_module`` return ``data``."""
    monkeypatch.setattr(fetch_module.urllib.request, "urlopen", lambda url, timeout: FakeResponse(data))
