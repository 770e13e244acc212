// A model's answer as safe HTML: markdown by marked, code highlighted by highlight.js, and the
// result sanitized by DOMPurify, since the model's text is untrusted (it may carry <script>, event
// handlers or javascript: links, by mistake or by a prompt injection).

import DOMPurify from "../vendor/dompurify/purify.es.js";
import hljs from "../vendor/highlightjs/core.min.js";
import bash from "../vendor/highlightjs/languages/bash.min.js";
import c from "../vendor/highlightjs/languages/c.min.js";
import cpp from "../vendor/highlightjs/languages/cpp.min.js";
import css from "../vendor/highlightjs/languages/css.min.js";
import diff from "../vendor/highlightjs/languages/diff.min.js";
import go from "../vendor/highlightjs/languages/go.min.js";
import java from "../vendor/highlightjs/languages/java.min.js";
import javascript from "../vendor/highlightjs/languages/javascript.min.js";
import json from "../vendor/highlightjs/languages/json.min.js";
import markdown from "../vendor/highlightjs/languages/markdown.min.js";
import python from "../vendor/highlightjs/languages/python.min.js";
import rust from "../vendor/highlightjs/languages/rust.min.js";
import shell from "../vendor/highlightjs/languages/shell.min.js";
import sql from "../vendor/highlightjs/languages/sql.min.js";
import typescript from "../vendor/highlightjs/languages/typescript.min.js";
import xml from "../vendor/highlightjs/languages/xml.min.js";
import yaml from "../vendor/highlightjs/languages/yaml.min.js";
import { Marked } from "../vendor/marked/marked.esm.js";

const languages = { bash, c, cpp, css, diff, go, java, javascript, json, markdown, python, rust, shell, sql, typescript, xml, yaml };
for (const [name, language] of Object.entries(languages)) hljs.registerLanguage(name, language);

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    code({ text, lang }) {
      const name = (lang || "").trim().split(/\s+/)[0];
      const known = name && hljs.getLanguage(name);
      const highlighted = known
        ? hljs.highlight(text, { language: name, ignoreIllegals: true }).value
        : hljs.highlightAuto(text).value;
      const label = known ? name : "";
      return `<pre><code class="hljs" data-language="${label}">${highlighted}</code></pre>`;
    },
  },
});

// Links the model writes open in a new tab and tell the new page nothing of this one.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.getAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/** The sanitized HTML of `text` written in markdown. */
export function renderMarkdown(text) {
  return DOMPurify.sanitize(marked.parse(text), { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "form"] });
}
