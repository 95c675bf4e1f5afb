"""Dockerfiles: the instructions berth's images may use and what their stages must hold."""

import json
import os
import re

from manifest_checks.report import REPO, error, info


INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
                "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def parse_dockerfile(path):
    """[(line number, INSTRUCTION, rest, instruction as written)], continuation
    lines joined; comments (parser directives too) and blank lines dropped.
    Heredocs (RUN <<EOF) are not understood, and reported."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        start = i + 1
        i += 1
        if not line.strip() or line.strip().startswith("#"):
            continue
        text = line.rstrip()
        while text.endswith("\\"):
            text = text[:-1]
            while i < len(lines) and (not lines[i].strip() or lines[i].strip().startswith("#")):
                i += 1  # comments and blank lines inside a continuation are dropped
            if i >= len(lines):
                error(f"{os.path.relpath(path, REPO)}:{start}", "the file ends inside a continued line")
                break
            text += " " + lines[i].strip()
            i += 1
            text = text.rstrip()
        word, _, rest = text.strip().partition(" ")
        if re.search(r"<<-?\s*['\"]?[A-Za-z_]+", rest) and word.upper() in ("RUN", "COPY", "ADD"):
            error(f"{os.path.relpath(path, REPO)}:{start}", "heredocs are beyond this check's parser; use && chains")
        out.append((start, word.upper(), rest.strip(), word))
    return out


def check_dockerfile(path, image_info):
    rel = os.path.relpath(path, REPO)
    instructions = parse_dockerfile(path)
    if not instructions:
        error(rel, "no instructions")
        return
    stages, args_before_from, seen_from, final_user = [], set(), False, None
    copied_bins = set()
    for n, ins, rest, word in instructions:
        at = f"{rel}:{n}"
        if ins not in INSTRUCTIONS:
            error(at, f"unknown instruction {word!r}")
            continue
        if word != ins:
            error(at, f"write instructions in upper case ({word!r})")
        if not seen_from and ins not in ("ARG", "FROM"):
            error(at, f"{ins} before the first FROM")
        if ins == "ARG" and not seen_from:
            args_before_from.add(rest.split("=", 1)[0].strip())
        if ins == "FROM":
            seen_from = True
            final_user = None
            words = [w for w in rest.split() if not w.startswith("--platform")]
            if len(words) not in (1, 3) or (len(words) == 3 and words[1].upper() != "AS"):
                error(at, f"FROM {rest!r}: expected FROM IMAGE [AS NAME]")
                continue
            for var in re.findall(r"\$\{?(\w+)", words[0]):
                if var not in args_before_from:
                    error(at, f"FROM uses ${var}, not declared by an ARG before the first FROM")
            if len(words) == 3:
                if words[2].lower() in [s.lower() for s in stages]:
                    error(at, f"stage name {words[2]!r} used twice")
                stages.append(words[2])
            else:
                stages.append(f"#{len(stages)}")
        if ins in ("CMD", "ENTRYPOINT", "RUN", "SHELL", "VOLUME") and rest.startswith("["):
            try:
                value = json.loads(rest)
                if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                    raise ValueError("not a list of strings")
            except ValueError as e:
                error(at, f"{ins} in exec form must be a JSON array of strings: {e}")
        if ins in ("COPY", "ADD"):
            opts = re.findall(r"--(\w+)(?:=(\S+))?", rest)
            for k, v in opts:
                if k == "from" and not (v in stages or v.isdigit() or "/" in v or ":" in v or "$" in v):
                    error(at, f"COPY --from={v}: no earlier stage of that name")
        for b in re.findall(r"build/\w+/(berth[\w-]*)", rest):
            copied_bins.add(b)
        if ins == "USER":
            final_user = rest.split(":")[0]
        if ins == "EXPOSE":
            for p in rest.split():
                if not re.match(r"^\d+(/(tcp|udp))?$", p):
                    error(at, f"EXPOSE {p!r} is not a port")
        if ins == "RUN" and re.search(r"apt-get install[^&|;]*\$\(", rest):
            error(at, "apt-get install $(...): a failing command substitution installs nothing and passes")
    if final_user in (None, "", "root", "0"):
        error(rel, "the final stage must switch to a non-root USER")
    if os.path.basename(path) == "Dockerfile":
        for b in sorted(image_info["binaries"]):
            if b not in copied_bins:
                error(rel, f"does not install build/*/{b}")
        image_info["uid"] = int(final_user) if final_user and final_user.isdigit() else None
    info(f"{rel}: {len(instructions)} instructions, stages {', '.join(stages)}, final USER {final_user}")
