// @ts-check
/**
 * A small element builder: the console never assigns innerHTML, so text from the API
 * (project names, env values, error details) is always inserted as text.
 */

/** A child: a node, text, nothing, or an array of children (nested arrays allowed). @typedef {Node | string | number | null | undefined | false | unknown[]} Child */

/**
 * Creates an element. Attributes: `class`, `for`, `aria-*`, `data-*` and the rest as
 * attributes; `on<event>` functions as listeners; `true`/`false` toggle boolean attributes;
 * `value`, `checked` and `disabled` are set as properties.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, unknown>} [attrs]
 * @param {Child[]} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), /** @type {EventListener} */ (value));
    } else if (name === "value" || name === "checked" || name === "disabled") {
      /** @type {any} */ (el)[name] = value;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/**
 * @param {Node} parent
 * @param {Child[]} children
 */
function append(parent, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, /** @type {Child[]} */ (child));
    else parent.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

let nextId = 0;
/** A document-unique id for label/input and aria-describedby pairs. */
export const uid = (/** @type {string} */ prefix) => `${prefix}-${++nextId}`;
