#!/usr/bin/env python3
"""config_reference.py — the key tables of docs/configuration.md are generated from the
binaries' key tables (`rtcedge-relay --print-config-reference`, `rtcedge-transceiver
--print-config-reference`) between BEGIN/END GENERATED markers.

  config_reference.py --relay BIN --transceiver BIN [--doc docs/configuration.md] --check
      exit 1 with a diff when the doc and a table disagree
  config_reference.py --relay BIN --transceiver BIN [--doc ...] --write
      rewrite the sections in place
"""
import argparse
import difflib
import pathlib
import re
import subprocess
import sys

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def section_re(name):
    return re.compile(r"(<!-- BEGIN GENERATED: %s --print-config-reference -->\n)(.*?)(<!-- END GENERATED: %s -->)"
                      % (re.escape(name), re.escape(name)), re.S)


def generated(binary):
    return subprocess.run([binary, "--print-config-reference"], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ap.add_argument("--transceiver", required=True)
    ap.add_argument("--doc", default=str(DOC))
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    args = ap.parse_args()

    doc_path = pathlib.Path(args.doc)
    text = doc_path.read_text()
    new_text = text
    failed = False
    for name, binary in (("rtcedge-relay", args.relay), ("rtcedge-transceiver", args.transceiver)):
        pattern = section_re(name)
        match = pattern.search(new_text)
        if not match:
            print("%s: no '<!-- BEGIN GENERATED: %s --print-config-reference -->' ... "
                  "'<!-- END GENERATED: %s -->' section" % (doc_path, name, name))
            failed = True
            continue
        want = generated(binary)
        if match.group(2) != want:
            if args.check:
                failed = True
                print("%s: the %s key table differs from `%s --print-config-reference`:" % (doc_path, name, name))
                sys.stdout.writelines(difflib.unified_diff(match.group(2).splitlines(True), want.splitlines(True),
                                                           "%s (doc)" % name, "%s (table)" % name))
            new_text = new_text[:match.start(2)] + want + new_text[match.end(2):]
    if args.write and new_text != text:
        doc_path.write_text(new_text)
    if failed and args.check:
        print("\nThe table in the code is the source: edit the key's entry (loader/relay_config_keys.cpp or "
              "transceiver/service/transceiver_config_keys.cpp), then regenerate the doc with\n"
              "  scripts/config_reference.py --relay build/bin/rtcedge-relay "
              "--transceiver build/bin/rtcedge-transceiver --write")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
