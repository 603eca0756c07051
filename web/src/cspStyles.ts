// GraphiQL's editor (Monaco) styles the page as it runs, in two ways that a Content-Security-
// Policy of `style-src 'self'` refuses: <style> elements it creates, and `style="..."`
// attributes in the HTML it writes with innerHTML (its lines, line numbers, guides). Neither is
// allowed inline here; instead:
// - every <style> this document creates carries the nonce the server put in this page's
//   <meta name="csp-nonce"> (a new one per answer, named in the page's policy);
// - HTML written through innerHTML or insertAdjacentHTML has its style attributes renamed
//   (data-csp-style) before it is parsed, then each is set through the CSS object model
//   (`element.style.cssText`), which a policy does not restrict; setAttribute("style", ...)
//   likewise.
// Imported first, before anything that could style the page.
const nonce = document.querySelector<HTMLMetaElement>('meta[name="csp-nonce"]')?.content;

if (nonce) {
  const create = Document.prototype.createElement;
  Document.prototype.createElement = function createElement(
    this: Document,
    tagName: string,
    options?: ElementCreationOptions,
  ): HTMLElement {
    const element = create.call(this, tagName, options);
    if (element instanceof HTMLStyleElement) element.nonce = nonce;
    return element;
  } as typeof Document.prototype.createElement;

  // Only inside tags (text is escaped: it holds no "<"), double-quoted as Monaco writes them.
  const TAG = /<[a-zA-Z][^>]*>/g;
  const STYLE = /(\s)style="([^"]*)"/;
  const KEPT = "data-csp-style";
  const hide = (html: string): string =>
    html.replace(TAG, (tag) => tag.replace(STYLE, `$1${KEPT}="$2"`));
  const restyle = (root: Element | null): void => {
    for (const element of root?.querySelectorAll<HTMLElement | SVGElement>(`[${KEPT}]`) ?? []) {
      element.style.cssText = element.getAttribute(KEPT) ?? "";
      element.removeAttribute(KEPT);
    }
  };

  const innerHTML = Object.getOwnPropertyDescriptor(Element.prototype, "innerHTML");
  const setInner = innerHTML?.set;
  if (innerHTML?.get && setInner) {
    Object.defineProperty(Element.prototype, "innerHTML", {
      configurable: true,
      enumerable: innerHTML.enumerable,
      get: innerHTML.get,
      set(this: Element, value: unknown) {
        const html = String(value);
        if (!html.includes("style=")) {
          setInner.call(this, value);
          return;
        }
        setInner.call(this, hide(html));
        restyle(this);
      },
    });
  }

  const insertAdjacentHTML = Element.prototype.insertAdjacentHTML;
  Element.prototype.insertAdjacentHTML = function (
    this: Element,
    position: InsertPosition,
    value: string,
  ): void {
    const html = String(value);
    if (!html.includes("style=")) {
      insertAdjacentHTML.call(this, position, value);
      return;
    }
    insertAdjacentHTML.call(this, position, hide(html));
    restyle(position === "afterbegin" || position === "beforeend" ? this : this.parentElement);
  };

  const setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (this: Element, name: string, value: string): void {
    if (name.toLowerCase() === "style" && (this instanceof HTMLElement || this instanceof SVGElement)) {
      this.style.cssText = value;
      return;
    }
    setAttribute.call(this, name, value);
  };
}

export {};
