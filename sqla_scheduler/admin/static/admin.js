/* sqla-scheduler admin: the time zone toggle, the page's only script.

   The server renders every time in UTC, as <time datetime="ISO 8601">UTC text</time>, and
   the page reads well without this script. With it, the header's toggle shows those
   times in the browser's own zone instead (and back), remembering the choice in
   localStorage so that every page of the admin opens the way it was left. */
(function () {
  "use strict";

  var KEY = "sqla-scheduler.admin.times";
  var button = document.querySelector("button.tz-toggle");
  if (!button) {
    return;
  }
  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local";
  var format = new Intl.DateTimeFormat("en-GB", {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
    hourCycle: "h23", timeZoneName: "shortOffset"
  });

  function stored() {
    try {
      return window.localStorage.getItem(KEY);
    } catch (e) {  // storage refused (e.g. a privacy setting): UTC each time
      return null;
    }
  }

  function store(choice) {
    try {
      window.localStorage.setItem(KEY, choice);
    } catch (e) {
      /* the choice holds for this page only */
    }
  }

  function instant(element) {
    var text = element.getAttribute("datetime") || "";
    // A time without an offset is UTC, as the server renders every time.
    if (text && !/(Z|[+-]\d\d:?\d\d)$/.test(text)) {
      text += "Z";
    }
    var date = new Date(text);
    return isNaN(date.getTime()) ? null : date;
  }

  function local(date) {
    var part = {};
    format.formatToParts(date).forEach(function (p) { part[p.type] = p.value; });
    return part.year + "-" + part.month + "-" + part.day + " " + part.hour + ":" +
      part.minute + ":" + part.second + " " + (part.timeZoneName || zone);
  }

  function show(choice) {
    var inLocal = choice === "local";
    var times = document.querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      var element = times[i];
      if (!element.hasAttribute("data-utc")) {
        element.setAttribute("data-utc", element.textContent);
      }
      var date = inLocal ? instant(element) : null;
      element.textContent = date ? local(date) : element.getAttribute("data-utc");
    }
    var names = document.querySelectorAll(".tz-name");
    for (var j = 0; j < names.length; j++) {
      names[j].textContent = inLocal ? zone : "UTC";
    }
    button.setAttribute("aria-pressed", inLocal ? "true" : "false");
    button.textContent = inLocal ? "times: " + zone : "times: UTC";
  }

  button.addEventListener("click", function () {
    var choice = button.getAttribute("aria-pressed") === "true" ? "utc" : "local";
    store(choice);
    show(choice);
  });
  button.hidden = false;
  show(stored() === "local" ? "local" : "utc");
})();
