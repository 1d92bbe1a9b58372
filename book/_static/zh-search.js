/* The Chinese edition's search: segment the query as the index was segmented.
 *
 * The build cut every page into words with jieba, the terminology as its dictionary
 * (book/_ext/editions.py), but Sphinx's searchtools.js splits a query only at spaces and
 * punctuation: 注意力机制 or 代词消解 would be one word that no page has. This file, loaded
 * on the search page before searchtools.js, defines the two things searchtools.js keeps
 * when a page defines them first:
 *
 * - splitQuery: each run of Chinese characters is cut by maximum matching (forward and
 *   backward, the cut with fewer and longer words wins) over a dictionary of the index's
 *   own Chinese words and the terminology's; a synonym (层归一化, 教师强制, 池化...) becomes
 *   the book's term (层规范化, 强制教学, 汇聚); a one-character piece is kept only when it is
 *   a term (键, 值, 头), as the index does; a dictionary word that no page has as a word
 *   is searched as the index's words it is made of.
 * - Scorer: Sphinx's scores, plus a bonus for how often the page uses the query's words
 *   (ZH_SEARCH_DATA.counts, counted by the build) and for introducing the word's term
 *   (ZH_SEARCH_DATA.introduced: the first chapter that links its glossary entry), so that
 *   the chapter about a term comes before a page that mentions it once.
 *
 * Plain JavaScript, no library, nothing fetched: ZH_SEARCH_DATA comes from
 * _static/zh-search-data.js, written by the build.
 */
"use strict";

var ZhSearch = (() => {
  const data = typeof ZH_SEARCH_DATA === "undefined" ? null : ZH_SEARCH_DATA;
  const HAN = /^\p{Script=Han}+$/u;
  const PIECES = /\p{Script=Han}+|[\p{Letter}\p{Number}_]+/gu;
  let dictionary = null;
  let indexed = null; // the index's own words
  let longest = 1;

  const load = () => {
    if (dictionary) return dictionary;
    dictionary = new Set();
    const add = (word) => {
      if (HAN.test(word)) {
        dictionary.add(word);
        longest = Math.max(longest, word.length);
      }
    };
    if (data) {
      data.words.forEach(add);
      Object.keys(data.synonyms).forEach(add);
      data.single.forEach(add);
    }
    const index = typeof Search !== "undefined" ? Search._index : null;
    indexed = new Set();
    if (index) {
      for (const word of [...Object.keys(index.terms), ...Object.keys(index.titleterms)])
        if (HAN.test(word)) {
          add(word);
          indexed.add(word);
        }
    }
    return dictionary;
  };

  // maximum matching from the left (backward = false) or from the right
  const match = (run, backward, words = dictionary) => {
    const found = [];
    let rest = run;
    while (rest.length) {
      let size = Math.min(longest, rest.length);
      for (; size > 1; size--) {
        const piece = backward ? rest.slice(rest.length - size) : rest.slice(0, size);
        if (words.has(piece)) break;
      }
      if (backward) {
        found.unshift(rest.slice(rest.length - size));
        rest = rest.slice(0, rest.length - size);
      } else {
        found.push(rest.slice(0, size));
        rest = rest.slice(size);
      }
    }
    return found;
  };

  const singles = (words) => words.filter((word) => word.length === 1).length;

  // the better of the two cuts: fewer words, then fewer single characters
  const cut = (run, words) => {
    const forward = match(run, false, words);
    const backward = match(run, true, words);
    if (forward.length !== backward.length)
      return forward.length < backward.length ? forward : backward;
    return singles(forward) < singles(backward) ? forward : backward;
  };

  const segment = (run) => {
    load();
    return dictionary.has(run) ? [run] : cut(run, dictionary);
  };

  // a word no page has as a word (a term the pages write in parts: 权重绑定 where a page
  // says 绑定) is searched as the index's words it is made of
  const inIndex = (word) =>
    indexed.has(word) || word.length < 3 || !HAN.test(word) ? [word] : cut(word, indexed);

  // the words searched for: synonyms replaced, one-character non-terms dropped
  const words = (query) => {
    const result = [];
    for (const piece of query.match(PIECES) || []) {
      if (!HAN.test(piece) || !data) {
        result.push(piece);
        continue;
      }
      const kept = [];
      for (const word of segment(piece)) {
        const target = data.synonyms[word] || word;
        for (const part of (target.match(PIECES) || []).flatMap(inIndex))
          if (part.length > 1 || data.single.includes(part)) kept.push(part);
      }
      // nothing left (only function characters): search the run as typed
      result.push(...(kept.length ? kept : [piece]));
    }
    return [...new Set(result)];
  };

  let current = [];
  const split = (query) => {
    current = words(query);
    return current;
  };

  // Sphinx's score of a result (a word in the text 5, in a heading 15), plus at most 4
  // points for how often the page uses the query's words, and 1 when the page introduces
  // the word's term (the first chapter that links its glossary entry); an exercise page,
  // which names the chapter's terms (in its task headings too) to ask for the next step,
  // ranks 10 points down: below the chapter that explains them, still in the results
  const exercise = (docname) => (docname.startsWith("book/exercises/") ? 10 : 0);
  const score = (result) => {
    const [docname, , anchor, , base] = result;
    if (!data || anchor || !current.length) return base - exercise(docname);
    const page = data.docnames.indexOf(docname);
    let often = 0;
    let linked = 0;
    for (const word of current) {
      often += Math.log2(1 + (((data.counts[word] || {})[page]) || 0));
      if ((data.introduced[word] || []).includes(page)) linked += 1;
    }
    return (
      base + Math.min(4, often / current.length / 2) + linked / current.length
        - exercise(docname)
    );
  };

  return { split, words, segment, score };
})();

var splitQuery = ZhSearch.split;

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
  score: ZhSearch.score,
};
