"""The packages that widen the text domain beyond its first six sources: Debian's dictionaries and
manuals, each with the licence its copyright file states, and the kind of prose it holds.

Why these: no data hub is reachable, and these are the largest bodies of openly licensed English
a registry serves (docs/DESIGN.md §4). Dictionaries bring definitions and quoted example
sentences; manuals are technical prose. `TEXT_KINDS` says which is which, so the share of
everyday prose (narrative, news, dictionary) can be reported (docs/DATA.md).
"""

from __future__ import annotations

from .corpus_docs import dictd, html_pages, man_pages, pod_pages, rst_pages
from .corpus_sources import Source
from .experiment_corpora import extract_python_docs

_SPHINX_CHROME = ("/_modules/", "/_static/", "genindex", "py-modindex", "/search.html")
_DOC = "usr/share/doc"

MORE_TEXT_SOURCES = (
    Source("gcide", "debian", "dict-gcide", dictd("gcide", "gcide"),
           license="GPL-2+ (GNU Collaborative International Dictionary of English; Webster 1913 public domain)"),
    Source("devils-dictionary", "debian", "dict-devil", dictd("devil", "devil"), license="public-domain"),
    Source("jargon", "debian", "dict-jargon", dictd("jargon", "jargon"), license="public-domain"),
    Source("foldoc", "debian", "dict-foldoc", dictd("foldoc", "foldoc"), license="GFDL-1.1+"),
    Source("python-docs", "debian", "python3.11-doc", extract_python_docs, license="PSF-2.0"),
    Source("linux-docs", "debian", "linux-doc-6.1",
           rst_pages("linux-docs", f"{_DOC}/linux-doc-6.1/html/_sources/**/*.rst.txt"), license="GPL-2"),
    Source("postgresql-docs", "debian", "postgresql-doc-15",
           html_pages("postgresql-docs", f"{_DOC}/postgresql-doc-15/html/*.html"), license="PostgreSQL"),
    Source("sqlite-docs", "debian", "sqlite3-doc",
           html_pages("sqlite-docs", f"{_DOC}/sqlite3/**/*.html"), license="public-domain"),
    Source("git-docs", "debian", "git-doc", html_pages("git-docs", f"{_DOC}/git-doc/**/*.html"), license="GPL-2"),
    Source("perl-docs", "debian", "perl-doc",
           pod_pages("perl-docs", "usr/share/perl/*/pod/perl[a-su-z]*.pod", "usr/share/perl/*/pod/perlt[a-np-z]*.pod"),
           license="GPL-1+ or Artistic"),
    Source("man-pages", "debian", "manpages", man_pages("man-pages", "usr/share/man/man*/*.gz"),
           license="Linux-man-pages-copyleft, GPL-2+"),
    Source("man-pages-dev", "debian", "manpages-dev", man_pages("man-pages-dev", "usr/share/man/man*/*.gz"),
           license="Linux-man-pages-copyleft, GPL-2+"),
    Source("django-docs", "debian", "python-django-doc",
           html_pages("django-docs", f"{_DOC}/python-django-doc/html/**/*.html", exclude=_SPHINX_CHROME),
           license="BSD-3-Clause"),
    Source("nodejs-docs", "debian", "nodejs-doc", html_pages("nodejs-docs", f"{_DOC}/nodejs/api/*.html"),
           license="Expat"),
    Source("sqlalchemy-docs", "debian", "python-sqlalchemy-doc",
           rst_pages("sqlalchemy-docs", f"{_DOC}/python-sqlalchemy-doc/rst/**/*.rst"), license="Expat"),
    Source("sphinx-docs", "debian", "sphinx-doc",
           rst_pages("sphinx-docs", f"{_DOC}/sphinx-doc/html/_sources/**/*.rst.txt"), license="BSD-2-clause"),
    Source("pandas-docs", "debian", "python-pandas-doc",
           rst_pages("pandas-docs", f"{_DOC}/python-pandas-doc/html/_sources/**/*.rst.txt"), license="BSD-3"),
    Source("scipy-docs", "debian", "python-scipy-doc",
           html_pages("scipy-docs", f"{_DOC}/python-scipy-doc/html/**/*.html", exclude=_SPHINX_CHROME),
           license="BSD-3-clause"),
    Source("rust-books", "debian", "rust-doc",
           html_pages("rust-books", *(f"{_DOC}/rust-doc/html/{b}/**/*.html" for b in (
               "book", "reference", "nomicon", "rust-by-example", "edition-guide", "embedded-book", "rustc",
               "rustdoc", "unstable-book")), exclude=("/print.html", "/searchindex", "/toc.html")),
           license="MIT or Apache-2.0"),
    Source("octave-docs", "debian", "octave-doc", html_pages("octave-docs", f"{_DOC}/octave/*.html/*.html"),
           license="GPL-3+"),
    Source("gimp-help", "debian", "gimp-help-en", html_pages("gimp-help", "usr/share/gimp/2.0/help/en/**/*.html"),
           license="GFDL-1.2+"),
    Source("gnucash-docs", "debian", "gnucash-docs",
           html_pages("gnucash-docs", f"{_DOC}/gnucash-docs/gnucash-guide-en/*.html",
                      "usr/share/help/C/gnucash-help/*.xml"), license="GFDL-NIV-1.1+ or GPL-2+"),
    Source("sklearn-docs", "debian", "python-sklearn-doc",
           html_pages("sklearn-docs", f"{_DOC}/python-sklearn-doc/html/**/*.html", exclude=_SPHINX_CHROME),
           license="BSD-3-clause"),
    Source("astropy-docs", "debian", "python-astropy-doc",
           html_pages("astropy-docs", f"{_DOC}/python-astropy-doc/html/**/*.html", exclude=_SPHINX_CHROME),
           license="BSD-3-clause"),
    Source("statsmodels-docs", "debian", "python-statsmodels-doc",
           html_pages("statsmodels-docs", f"{_DOC}/python-statsmodels-doc/html/**/*.html", exclude=_SPHINX_CHROME),
           license="BSD-3-clause"),
    Source("dask-docs", "debian", "python-dask-doc",
           html_pages("dask-docs", f"{_DOC}/python-dask-doc/html/**/*.html", exclude=_SPHINX_CHROME),
           license="BSD-3-clause"),
    Source("skimage-docs", "debian", "python-skimage-doc",
           html_pages("skimage-docs", f"{_DOC}/python-skimage-doc/html/**/*.html", exclude=_SPHINX_CHROME),
           license="BSD-3-clause"),
    Source("xarray-docs", "debian", "python-xarray-doc",
           html_pages("xarray-docs", f"{_DOC}/python-xarray-doc/html/**/*.html", exclude=_SPHINX_CHROME),
           license="Apache-2.0"),
    Source("sympy-docs", "debian", "python-sympy-doc",
           html_pages("sympy-docs", f"{_DOC}/python-sympy-doc/html/**/*.html", exclude=_SPHINX_CHROME),
           license="BSD-3-clause"),
    Source("java-api-docs", "debian", "openjdk-17-doc",
           html_pages("java-api-docs", f"{_DOC}/openjdk-17-jre-headless/api/**/*.html",
                      exclude=("/class-use/", "package-tree", "/index-files/", "overview-tree", "allclasses",
                               "allpackages", "deprecated-list", "constant-values", "serialized-form")),
           license="GPL-2 with Classpath exception"),
    Source("cmake-docs", "debian", "cmake-doc",
           rst_pages("cmake-docs", f"{_DOC}/cmake-data/html/_sources/**/*.rst.txt"), license="BSD-3-clause"),
    Source("erlang-docs", "debian", "erlang-doc", html_pages("erlang-docs", f"{_DOC}/erlang-doc/**/*.html"),
           license="Apache-2.0"),
    Source("zsh-docs", "debian", "zsh-doc", html_pages("zsh-docs", f"{_DOC}/zsh-common/html/*.html"),
           license="Zsh (MIT-like)"),
    Source("exim-docs", "debian", "exim4-doc-html",
           html_pages("exim-docs", f"{_DOC}/exim4-doc-html/spec_html/*.html"), license="GPL-2+"),
    Source("bind9-docs", "debian", "bind9-doc", html_pages("bind9-docs", f"{_DOC}/bind9-doc/arm/*.html"),
           license="MPL-2.0"),
    Source("debian-handbook", "debian", "debian-handbook",
           html_pages("debian-handbook", f"{_DOC}/debian-handbook/html/en-US/*.html"),
           license="GPL-2.0+ or CC-BY-SA-3.0"),
    Source("debian-reference", "debian", "debian-reference-en",
           html_pages("debian-reference", "usr/share/debian-reference/*.en.html"), license="GPL-2+"),
    Source("debian-policy", "debian", "debian-policy",
           rst_pages("debian-policy", f"{_DOC}/debian-policy/policy.html/_sources/*.rst.txt"), license="GPL-2+"),
    Source("developers-reference", "debian", "developers-reference",
           rst_pages("developers-reference", "usr/share/developers-reference/_sources/*.rst.txt"), license="GPL-2"),
    Source("maint-guide", "debian", "maint-guide",
           html_pages("maint-guide", f"{_DOC}/maint-guide/html/*.en.html"), license="MIT"),
    Source("debian-faq", "debian", "debian-faq", html_pages("debian-faq", f"{_DOC}/debian/FAQ/*.html"),
           license="GPL-2+"),
)

#: what kind of prose each source holds; a source not named here is a technical manual
TEXT_KINDS = {
    "bible-web": "narrative", "bible-bbe": "narrative", "shakespeare": "narrative", "brown": "narrative",
    "bbc-news": "news",
    "wordnet": "dictionary", "gcide": "dictionary", "devils-dictionary": "dictionary", "jargon": "dictionary",
    "foldoc": "dictionary",
}
