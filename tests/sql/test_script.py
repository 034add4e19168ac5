from dyntables.sql import is_complete, split_statements


def test_splits_on_semicolons_outside_strings_and_comments() -> None:
    text = """
    SELECT 'a;b' AS x; -- a comment; with a semicolon
    SELECT `weird;name` FROM t /* block; comment */ ;
    ;
    SELECT 3
    """
    assert split_statements(text) == [
        "SELECT 'a;b' AS x",
        "SELECT `weird;name` FROM t",
        "SELECT 3",
    ]


def test_empty_and_comment_only_scripts_have_no_statements() -> None:
    assert split_statements("") == []
    assert split_statements("  -- just a comment;\n /* and; this */ ;") == []


def test_escaped_quote_inside_string() -> None:
    assert split_statements(r"SELECT 'it\'s; fine'; SELECT 2") == [
        r"SELECT 'it\'s; fine'",
        "SELECT 2",
    ]


def test_is_complete_waits_for_the_terminator() -> None:
    assert not is_complete("SELECT 1")
    assert not is_complete("SELECT ';'")
    assert not is_complete("SELECT 'unterminated;")
    assert is_complete("SELECT 1;")
    assert is_complete("SELECT 1\n  FROM t;  ")
