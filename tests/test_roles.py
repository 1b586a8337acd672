"""Which subjects a question names by their role, and which notes tie a role to a name (no store)."""

from __future__ import annotations

from mnemo.search.roles import named_by_role, role_words


def test_role_words_are_the_words_shortly_after_my_our_the():
    assert role_words("Who is my brother marrying?") == {"brother", "marrying"}
    assert role_words("What's my son's favourite topic?") == {"son"}  # the role ends at its 's
    assert role_words("Is there food the little boy must avoid?") == {"little", "boy", "must"}
    assert role_words("What is Liam's blood type?") == set()


def test_a_note_that_says_what_a_name_is_ties_the_role_to_it():
    roles = {"brother", "cat", "intern", "postdoc"}
    assert named_by_role("Liam is the user's younger brother, three years younger.", roles) == {"brother": {"liam"}}
    assert named_by_role("Pepper is a grey tabby cat the family adopted in 2023.", roles) == {"cat": {"pepper"}}
    assert named_by_role("Ben Osei is a summer intern on Payments.", roles) == {"intern": {"ben"}}
    assert named_by_role("Lin (postdoc) starts Monday", roles) == {"postdoc": {"lin"}}
    assert named_by_role("New intern Ben starts Monday", roles) == {"intern": {"ben"}}
    # The user's, the family's, the practice's: the asker's own circle, not words of the role.
    assert named_by_role("Juniper is the family's retired racing greyhound.", {"greyhound"}) == {
        "greyhound": {"juniper"}
    }
    assert named_by_role("Rhys is the practice's junior vet.", {"vet"}) == {"vet": {"rhys"}}


def test_a_role_of_someone_else_or_a_name_doing_something_ties_nothing():
    roles = {"son", "daughter", "dog", "team", "friend"}
    assert named_by_role("Tiago is Helena's son; the user is his godmother.", roles) == {}
    assert named_by_role("Marco's daughter was born on 11 April 2026.", roles) == {}
    assert named_by_role("Emma walks the dog before school.", roles) == {}  # a verb, not a role
    # The team is where Marco is, not what he is.
    assert named_by_role("Marco is the user's closest friend on the team.", roles) == {"friend": {"marco"}}
