/* The summary under each search result is cut from the page's [role="main"], which in this theme also
   holds the buttons above the article ("System Settings 亮色 暗色"), the page's table of contents, a
   copy of the title and contents for printing, and the previous/next links. Leave them out so that
   the summary is the chapter's own text. */
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined" || typeof Search.htmlToText !== "function") return;
  const pageText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    for (const chrome of page.querySelectorAll(".bd-header-article, .bd-sidebar-secondary, .prev-next-area, .onlyprint")) {
      chrome.remove();
    }
    return pageText(page.documentElement.outerHTML, anchor);
  };
});
