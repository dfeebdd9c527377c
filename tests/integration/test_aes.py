"""squall-nf-aes (FlexNFV's encryptor, issue 15): the L4 payload of IPv4 TCP/UDP
frames encrypted in place with AES-CTR, headers and lengths kept; the same NF
again decrypts; the ciphertext is what `openssl enc` makes of the same payload
with the same key and counter block; other frames pass and are counted."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pcaps
import pytest
from conftest import Manager
from scapy.layers.inet import Ether
from scapy.layers.l2 import ARP

N_PKTS = 300
KEY_HEX = "000102030405060708090a0b0c0d0e0f"


def aes_config(mgr: Manager, tmp_path: Path, hops: int, frames: list[bytes]) -> dict:
    key = tmp_path / "key.hex"
    key.write_text(KEY_HEX + "\n")
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    names = [f"aes{i}" for i in range(hops)]
    return mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={tmp_path / 'out.pcap'}"},
        ],
        services=[
            {"name": n, "exec": "squall-nf-aes", "args": ["--key-file", str(key)]} for n in names
        ],
        chains=[{"name": "c", "services": names}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )


def payload_offset(frame: bytes) -> tuple[int, int, bytes]:
    """(offset, length, counter block) of an untagged IPv4 TCP/UDP frame, as
    nfs/aes/aes.c takes them."""
    ip = frame[14:]
    ihl = (ip[0] & 0xF) * 4
    total = struct.unpack("!H", ip[2:4])[0]
    proto = ip[9]
    l4 = ip[ihl:]
    l4_len = (l4[12] >> 4) * 4 if proto == 6 else 8
    iv = bytearray(16)
    iv[0:4] = ip[12:16]
    iv[4] = ip[16] ^ proto
    iv[5:7] = ip[4:6]
    iv[7] = ip[19]
    iv[8:12] = l4[4:8] if proto == 6 else b"\0\0\0\0"
    iv[12:16] = l4[0:4]
    return 14 + ihl + l4_len, total - ihl - l4_len, bytes(iv)


def test_encrypts_payloads_in_place_as_openssl_does(mgr: Manager, tmp_path: Path) -> None:
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    mgr.start(aes_config(mgr, tmp_path, 1, frames))
    mgr.wait_port_tx("out", N_PKTS)
    ex = mgr.finish()
    out = pcaps.read_pcap(tmp_path / "out.pcap")
    assert len(out) == len(frames)
    c = ex["nfs"]["aes0#0"]["counters"]
    assert c["aes_pkts"] == N_PKTS and c["aes_skipped"] == 0 and c["aes_failed"] == 0, c
    for sent, got in zip(frames, out, strict=True):
        off, n, iv = payload_offset(sent)
        assert len(got) == len(sent)
        assert got[:off] == sent[:off], "a header changed"
        assert got[off : off + n] != sent[off : off + n], "a payload was not encrypted"
        assert got[off + n :] == sent[off + n :], "bytes past the IP total length changed"
    # One frame through the real openssl: the same key and counter block give
    # the same ciphertext.
    sent, got = frames[1], out[1]
    off, n, iv = payload_offset(sent)
    r = subprocess.run(
        ["openssl", "enc", "-aes-128-ctr", "-K", KEY_HEX, "-iv", iv.hex()],
        input=sent[off : off + n],
        capture_output=True,
        check=True,
    )
    assert r.stdout == got[off : off + n]


def test_twice_gives_the_frames_back_and_other_frames_pass(mgr: Manager, tmp_path: Path) -> None:
    arp = bytes(Ether(src=pcaps.SRC_MAC, dst=pcaps.mac(1)) / ARP(pdst="10.0.0.9"))
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)]) + [arp]
    mgr.start(aes_config(mgr, tmp_path, 2, frames))
    mgr.wait_port_tx("out", len(frames))
    ex = mgr.finish()
    assert pcaps.read_pcap(tmp_path / "out.pcap") == frames
    for hop in ("aes0#0", "aes1#0"):
        c = ex["nfs"][hop]["counters"]
        assert c["aes_pkts"] == N_PKTS and c["aes_skipped"] == 1, (hop, c)


@pytest.mark.parametrize(
    ("content", "why"),
    [("short", "expected 16 or 32 raw bytes"), (None, "No such file")],
)
def test_a_bad_key_file_is_a_usage_error(tmp_path: Path, content: str | None, why: str) -> None:
    from conftest import NF_DIR

    key = tmp_path / "key"
    if content is not None:
        key.write_text(content)
    r = subprocess.run(
        [str(NF_DIR / "squall-nf-aes"), "--key-file", str(key)],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert r.returncode == 2 and why in r.stderr, (r.returncode, r.stderr)
