"""Java .properties syntax, and ${provider:path:key} config-provider variables."""

from __future__ import annotations

from pathlib import Path

import javaproperties
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirrorlib import ConfigError
from mirrorlib.core.config.properties import (
    parse_properties,
    read_properties_file,
    resolve_variables,
)


def values(text: str) -> dict[str, str]:
    return dict(parse_properties(text).values)


@pytest.mark.parametrize(
    ("line", "key", "value"),
    [
        ("a=b", "a", "b"),
        ("a = b", "a", "b"),
        ("a:b", "a", "b"),
        ("a : b", "a", "b"),
        ("a b", "a", "b"),
        ("a\tb", "a", "b"),
        ("   a    b  ", "a", "b  "),  # trailing blanks of a value are kept
        ("a=", "a", ""),
        ("a", "a", ""),
        ("a==b", "a", "=b"),  # only the first separator separates
        ("a = b = c", "a", "b = c"),
        ("a\\ b=c", "a b", "c"),  # escaped space in a key
        ("a\\=b=c", "a=b", "c"),
        ("a\\:b:c", "a:b", "c"),
        ("key=\\u00e9t\\u00E9", "key", "été"),
        ("k=tab\\there", "k", "tab\there"),
        ("k=new\\nline", "k", "new\nline"),
        ("k=\\z\\q", "k", "zq"),  # unknown escapes keep the character
        ("k=C:\\\\temp", "k", "C:\\temp"),
        ("x = true # disabled by default", "x", "true # disabled by default"),
    ],
)
def test_separators_and_escapes(line: str, key: str, value: str) -> None:
    assert values(line) == {key: value}


def test_comments_blank_lines_and_line_endings() -> None:
    text = "# comment\n! also a comment\n   # indented comment\n\n\na=1\r\nb=2\rc=3\n"
    assert values(text) == {"a": "1", "b": "2", "c": "3"}


def test_continuation_lines() -> None:
    text = "topics = a, \\\n         b, \\\n   c\nnext = 1\n"
    assert values(text) == {"topics": "a, b, c", "next": "1"}


def test_even_backslashes_do_not_continue() -> None:
    assert values("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}


def test_continuation_at_end_of_file() -> None:
    assert values("a=x\\") == {"a": "x"}


def test_comment_is_not_continued() -> None:
    assert values("# comment \\\na=1") == {"a": "1"}


def test_duplicate_keys_last_wins() -> None:
    parsed = parse_properties("a=1\nb=2\na=3\n")
    assert dict(parsed.values) == {"a": "3", "b": "2"}
    assert parsed.lines["a"] == 3


def test_line_numbers_count_continuations() -> None:
    parsed = parse_properties("# c\na=1 \\\n 2\n\nb=3\n")
    assert parsed.lines == {"a": 2, "b": 5}


def test_malformed_unicode_escape_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="uXXXX"):
        parse_properties("a=1\nb=\\u12G4\n")


def test_read_file_utf8_and_latin1(tmp_path: Path) -> None:
    utf8 = tmp_path / "u.properties"
    utf8.write_bytes("a=été\n".encode())
    assert dict(read_properties_file(utf8).values) == {"a": "été"}
    latin = tmp_path / "l.properties"
    latin.write_bytes("a=\xe9t\xe9\n".encode("iso-8859-1"))
    assert dict(read_properties_file(latin).values) == {"a": "été"}


def test_read_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Cannot read"):
        read_properties_file(tmp_path / "missing.properties")


_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
    max_size=20,
)


@given(st.dictionaries(_text.filter(bool), _text, max_size=8))
def test_round_trip_through_java_escaping(data: dict[str, str]) -> None:
    text = javaproperties.dumps(data, timestamp=False)
    assert values(text) == data


# -- config providers ------------------------------------------------------------------------------

PROVIDERS = {
    "config.providers": "file, dir, env",
    "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
    "config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
    "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
}


def test_file_directory_and_env_providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("password = s3cret\nuser: alice\n")
    (tmp_path / "token").write_text("tok\n")
    monkeypatch.setenv("MM2_TEST_VAR", "from-env")
    resolved = resolve_variables(
        {
            **PROVIDERS,
            "a.sasl.password": f"${{file:{secrets}:password}}",
            "b": f"user=${{file:{secrets}:user}} token=${{dir:{tmp_path}:token}}",
            "c": "${env:MM2_TEST_VAR}",
            "plain": "no variables",
        }
    )
    assert resolved.values["a.sasl.password"] == "s3cret"
    assert resolved.values["b"] == "user=alice token=tok\n"
    assert resolved.values["c"] == "from-env"
    assert resolved.values["plain"] == "no variables"
    assert resolved.secret_keys == {"a.sasl.password", "b", "c"}


def test_unknown_provider_name_is_an_error() -> None:
    with pytest.raises(ConfigError, match="vault") as info:
        resolve_variables({"a.password": "${vault:secret/x:pw}"})
    assert info.value.key == "a.password"


def test_unsupported_provider_class_is_an_error() -> None:
    with pytest.raises(ConfigError, match="not supported") as info:
        resolve_variables(
            {
                "config.providers": "vault",
                "config.providers.vault.class": "com.example.VaultConfigProvider",
                "x": "${vault:a:b}",
            }
        )
    assert info.value.key == "config.providers.vault.class"


def test_missing_env_var_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MM2_SURELY_UNSET", raising=False)
    with pytest.raises(ConfigError, match="MM2_SURELY_UNSET"):
        resolve_variables({**PROVIDERS, "x": "${env:MM2_SURELY_UNSET}"})
    secrets = tmp_path / "s.properties"
    secrets.write_text("a=1\n")
    with pytest.raises(ConfigError, match="no key 'b'"):
        resolve_variables({**PROVIDERS, "x": f"${{file:{secrets}:b}}"})


def test_allowed_paths(tmp_path: Path) -> None:
    secrets = tmp_path / "s.properties"
    secrets.write_text("a=1\n")
    config = {**PROVIDERS, "config.providers.file.param.allowed.paths": "/nonexistent/dir"}
    with pytest.raises(ConfigError, match="allowed.paths"):
        resolve_variables({**config, "x": f"${{file:{secrets}:a}}"})
    config["config.providers.file.param.allowed.paths"] = str(tmp_path)
    assert resolve_variables({**config, "x": f"${{file:{secrets}:a}}"}).values["x"] == "1"


def test_env_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MM2_OK", "1")
    config = {**PROVIDERS, "config.providers.env.param.allowlist.pattern": "MM2_OK"}
    assert resolve_variables({**config, "x": "${env:MM2_OK}"}).values["x"] == "1"
    monkeypatch.setenv("OTHER", "2")
    with pytest.raises(ConfigError, match="allowlist"):
        resolve_variables({**config, "x": "${env:OTHER}"})
