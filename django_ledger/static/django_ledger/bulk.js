// A bulk run's page: while the run goes on, post the page's form again once it has
// rendered, so each post runs a few more seconds of pages and shows the progress.
"use strict";
{
  const form = document.getElementById("bulk-step");
  if (form) {
    window.setTimeout(() => form.submit(), 200);
  }
}
