/* The English edition's search: Sphinx's ranking, with two changes (the Chinese edition's
 * book/_static/zh-search.js makes the same two, among others).
 *
 * - A query of several words ranks a page by the mean of its words' scores (a word in a
 *   heading 15, in the text 5), where Sphinx takes the best one: a page with every word of
 *   "softmax backward" in a heading (the exercise page's task 1) comes before a page with
 *   one of them in a heading and the other in its text.
 * - A query with a number ("exercise 2"), which the index does not hold (Sphinx drops a
 *   word of digits), finds the pages and sections whose title has the query as typed: they
 *   come first.
 *
 * Loaded on the search page before searchtools.js, which keeps a ``splitQuery`` and a
 * ``Scorer`` that a page defines first. Plain JavaScript, nothing fetched.
 */
"use strict";

var EnSearch = (() => {
  const HEADING = 15;
  const TEXT = 5;
  const TYPED = 100;
  let words = [];
  let typed = "";

  // Sphinx's own splitQuery (searchtools.js), which also keeps the query's words, stemmed
  // as searchtools.js stems them, for the Scorer
  const split = (query) => {
    const parts = query.split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu).filter((t) => t);
    typed = query.toLowerCase().replace(/\s+/g, " ").trim();
    const stemmer = typeof Stemmer === "undefined" ? null : new Stemmer();
    const skip = typeof stopwords === "undefined" ? [] : stopwords;
    words = [
      ...new Set(
        parts
          .map((part) => part.toLowerCase())
          .filter((part) => !skip.includes(part) && !/^\d+$/.test(part))
          .map((part) => (stemmer ? stemmer.stemWord(part) : part)),
      ),
    ];
    return parts;
  };

  const holds = (group, word, file) => {
    const files = group[word];
    return files !== undefined && (files === file || (files.length > 0 && files.includes(file)));
  };
  const plain = (title) => (title || "").replace(/<[^>]*>/g, "").replace(/\s+/g, " ").toLowerCase();

  const score = (result) => {
    const [docname, title, anchor, , sphinx] = result;
    if (/\d/.test(typed) && plain(title).includes(typed)) return TYPED + sphinx;
    if (anchor || words.length < 2 || typeof Search === "undefined" || !Search._index) return sphinx;
    const index = Search._index;
    const file = index.docnames.indexOf(docname);
    const total = words.reduce(
      (sum, word) =>
        sum + (holds(index.titleterms, word, file) ? HEADING : holds(index.terms, word, file) ? TEXT : 0),
      0,
    );
    return total / words.length;
  };

  return { split, score };
})();

var splitQuery = EnSearch.split;

var Scorer = {
  // Sphinx's own weights (searchtools.js)
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
  score: EnSearch.score,
};
