"""The model card beside the editor speaks of the model it shows: a bundled checkpoint's card names no
Hub options (the ASSD authors' code spelling, the special-token rule, the <s> note are about XLNet
checkpoints from the Hub, and a bare bundled name such as text-asarm looks like a Hub id)."""

from app.views.cards import card_markdown, hub_options_line


def test_a_bundled_models_card_names_no_hub_options():
    card = card_markdown("text-asarm")
    assert "text-asarm" in card and "AS-ARM" in card
    assert hub_options_line("text-asarm") == "" and "Options:" not in card and "XLNet" not in card
